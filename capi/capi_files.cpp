// The C API's files: SPEC §7 batch and result files, read into API objects and written from
// views, atomically (harness/batch_file.hpp).
#include <fmt/format.h>

#include <memory>

#include "capi_support.hpp"

using namespace logprobs;
using logprobs::capi::Failure;
using logprobs::capi::guarded;
using logprobs::capi::required;

namespace {

MetadataList listed(const FileMetadata& metadata) { return {metadata.begin(), metadata.end()}; }

void entry(const MetadataList* metadata, uint64_t index, const char** key, const char** value) {
  const bool present = metadata != nullptr && index < metadata->size();
  if (key != nullptr) *key = present ? (*metadata)[index].first.c_str() : nullptr;
  if (value != nullptr) *value = present ? (*metadata)[index].second.c_str() : nullptr;
}

}  // namespace

extern "C" {

logprobs_status logprobs_load_batch(const char* path, logprobs_batch** batch, logprobs_error** error) {
  return guarded(error, [&] {
    required(batch, "batch");
    required(path, "path");
    BatchFile file = read_batch_file(path);
    auto owned = std::make_unique<logprobs_batch>();
    owned->data = std::move(file.batch);
    owned->k = file.k;
    owned->metadata = listed(file.metadata);
    *batch = owned.release();
  });
}

logprobs_status logprobs_load_result(const char* path, logprobs_result** result, logprobs_error** error) {
  return guarded(error, [&] {
    required(result, "result");
    required(path, "path");
    ResultFile file = read_result_file(path);
    auto owned = std::make_unique<logprobs_result>();
    owned->layout = file.layout;
    owned->packed = std::move(file.packed);
    owned->split = std::move(file.split);
    owned->k = file.k;
    owned->metadata = listed(file.metadata);
    *result = owned.release();
  });
}

uint64_t logprobs_batch_metadata_count(const logprobs_batch* batch) {
  return batch == nullptr ? 0 : batch->metadata.size();
}

void logprobs_batch_metadata(const logprobs_batch* batch, uint64_t index, const char** key, const char** value) {
  entry(batch == nullptr ? nullptr : &batch->metadata, index, key, value);
}

uint64_t logprobs_result_metadata_count(const logprobs_result* result) {
  return result == nullptr ? 0 : result->metadata.size();
}

void logprobs_result_metadata(const logprobs_result* result, uint64_t index, const char** key, const char** value) {
  entry(result == nullptr ? nullptr : &result->metadata, index, key, value);
}

logprobs_status logprobs_save_batch(const char* path, const logprobs_batch_view* batch, int64_t k,
                                    const char* const* metadata_keys, const char* const* metadata_values,
                                    uint64_t metadata_count, logprobs_error** error) {
  return guarded(error, [&] {
    required(path, "path");
    if (k > static_cast<int64_t>(kMaxK))
      throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("k {} exceeds {}", k, kMaxK));
    const FileMetadata metadata = capi::metadata_of(metadata_keys, metadata_values, metadata_count);
    const BatchData data = capi::copy_batch(capi::to_batch(batch));
    write_batch_file(path, data, k < 0 ? std::nullopt : std::optional<std::uint32_t>(static_cast<std::uint32_t>(k)),
                     metadata);
  });
}

logprobs_status logprobs_save_result(const char* path, const logprobs_result_view* result,
                                     const char* const* metadata_keys, const char* const* metadata_values,
                                     uint64_t metadata_count, logprobs_error** error) {
  return guarded(error, [&] {
    required(path, "path");
    const logprobs_result_view& view = required(result, "result");
    const FileMetadata metadata = capi::metadata_of(metadata_keys, metadata_values, metadata_count);
    switch (view.layout) {
      case LOGPROBS_PACKED:
        write_result_file(path, capi::copy_packed(view), metadata);
        break;
      case LOGPROBS_SPLIT:
        write_split_result_file(path, capi::copy_split(view), metadata);
        break;
      default:
        throw Failure(LOGPROBS_INVALID_ARGUMENT,
                      fmt::format("result layout {} is neither LOGPROBS_PACKED nor LOGPROBS_SPLIT", view.layout));
    }
  });
}

}  // extern "C"
