// The C API: its version, errors, batch objects, the output shape and row plan, the backends and
// running them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "capi_support.hpp"

using namespace logprobs;
using logprobs::capi::Failure;
using logprobs::capi::guarded;
using logprobs::capi::required;

namespace {

const Backend& runnable_backend(const char* name) {
  required(name, "backend");
  const Backend* backend = find_backend(name);
  if (backend == nullptr) {
    std::vector<std::string_view> known;
    for (const Backend* b : all_backends()) known.push_back(b->name());
    throw Failure(LOGPROBS_UNKNOWN_BACKEND,
                  fmt::format("unknown backend '{}' (known: {})", name, fmt::join(known, ", ")));
  }
  const Availability availability = backend->availability();
  if (!availability.available)
    throw Failure(LOGPROBS_UNAVAILABLE,
                  fmt::format("backend '{}' is not available here: {}", backend->name(), availability.reason));
  return *backend;
}

// Runs `backend` into a new packed result whose metadata names it and K, as `logprobs-check run`
// writes them.
void run_into(const Backend& backend, const logprobs_batch_view* view, std::uint32_t k, std::int32_t ranks,
              logprobs_result** result) {
  required(result, "result");
  const RaggedBatch batch = capi::to_batch(view);
  const OutputShape shape = validate_batch(batch, k);
  auto owned = std::make_unique<logprobs_result>();
  owned->packed = ResultData(shape.rows, shape.width, ranks != 0);
  backend.run(batch, k, owned->packed.view());
  owned->k = k;
  owned->metadata = {{"backend", std::string(backend.name())}, {"k", std::to_string(k)}};
  *result = owned.release();
}

}  // namespace

extern "C" {

uint32_t logprobs_api_version(void) { return LOGPROBS_API_VERSION; }

logprobs_status logprobs_error_status(const logprobs_error* error) {
  return error == nullptr ? LOGPROBS_OK : error->status;
}

const char* logprobs_error_message(const logprobs_error* error) {
  return error == nullptr ? "" : error->message.c_str();
}

void logprobs_error_free(logprobs_error* error) { delete error; }

const char* logprobs_status_name(logprobs_status status) {
  switch (status) {
    case LOGPROBS_OK:
      return "LOGPROBS_OK";
    case LOGPROBS_INVALID_ARGUMENT:
      return "LOGPROBS_INVALID_ARGUMENT";
    case LOGPROBS_INVALID_BATCH:
      return "LOGPROBS_INVALID_BATCH";
    case LOGPROBS_UNSUPPORTED_PART:
      return "LOGPROBS_UNSUPPORTED_PART";
    case LOGPROBS_UNKNOWN_BACKEND:
      return "LOGPROBS_UNKNOWN_BACKEND";
    case LOGPROBS_UNAVAILABLE:
      return "LOGPROBS_UNAVAILABLE";
    case LOGPROBS_FILE_ERROR:
      return "LOGPROBS_FILE_ERROR";
    case LOGPROBS_OUT_OF_MEMORY:
      return "LOGPROBS_OUT_OF_MEMORY";
    case LOGPROBS_CALLBACK_FAILED:
      return "LOGPROBS_CALLBACK_FAILED";
    case LOGPROBS_INTERNAL_ERROR:
      return "LOGPROBS_INTERNAL_ERROR";
    default:
      return "unknown";
  }
}

void logprobs_batch_get_view(const logprobs_batch* batch, logprobs_batch_view* view) {
  if (view == nullptr) return;
  *view = batch == nullptr ? logprobs_batch_view{} : capi::to_view(batch->data.view());
}

int64_t logprobs_batch_k(const logprobs_batch* batch) {
  return batch != nullptr && batch->k ? static_cast<int64_t>(*batch->k) : -1;
}

void logprobs_batch_free(logprobs_batch* batch) { delete batch; }

logprobs_status logprobs_output_shape(const logprobs_batch_view* batch, uint32_t k, uint64_t* rows, uint64_t* width,
                                      logprobs_error** error) {
  return guarded(error, [&] {
    const OutputShape shape = validate_batch(capi::to_batch(batch), k);
    if (rows != nullptr) *rows = shape.rows;
    if (width != nullptr) *width = shape.width;
  });
}

logprobs_status logprobs_plan_rows(const logprobs_batch_view* batch, uint64_t capacity, uint64_t* logit_rows,
                                   uint32_t* tokens, uint32_t* batch_items, uint64_t* count, logprobs_error** error) {
  return guarded(error, [&] {
    const RaggedBatch view = capi::to_batch(batch);
    validate_batch(view, 0);
    const std::vector<RowTask> tasks = plan_rows(view);
    for (std::uint64_t o = 0; o < tasks.size() && o < capacity; ++o) {
      if (logit_rows != nullptr) logit_rows[o] = tasks[o].logit_row;
      if (tokens != nullptr) tokens[o] = tasks[o].token;
      if (batch_items != nullptr) batch_items[o] = tasks[o].batch_item;
    }
    if (count != nullptr) *count = tasks.size();
  });
}

void logprobs_result_get_view(const logprobs_result* result, logprobs_result_view* view) {
  if (view == nullptr) return;
  *view = result == nullptr ? logprobs_result_view{} : capi::to_view(*result);
}

int64_t logprobs_result_k(const logprobs_result* result) {
  return result != nullptr && result->k ? static_cast<int64_t>(*result->k) : -1;
}

void logprobs_result_free(logprobs_result* result) { delete result; }

logprobs_status logprobs_backends(logprobs_backend_list** list, logprobs_error** error) {
  return guarded(error, [&] {
    required(list, "list");
    auto owned = std::make_unique<logprobs_backend_list>();
    for (const Backend* backend : all_backends()) {
      const Availability availability = backend->availability();
      const Features features = backend->features();
      BackendEntry& e = owned->entries.emplace_back();
      e.name = backend->name();
      e.description = backend->description();
      e.unavailable_reason = availability.available ? "" : availability.reason;
      e.variant_of = backend->variant_of();
      e.info.available = availability.available;
      e.info.bf16_logits = features.bf16_logits;
      e.info.f16_logits = features.f16_logits;
      e.info.temperatures = features.temperatures;
      e.info.ranks = features.ranks;
      e.info.any_k = features.any_k;
      e.info.sums_in_one_chain = backend->sums_in_one_chain();
      e.info.claims_canonical_arithmetic = backend->claims_canonical_arithmetic();
      e.info.computes_on_host = backend->computes_on_host();
    }
    // The strings' addresses are final only once the vector stops growing.
    for (BackendEntry& e : owned->entries) {
      e.info.name = e.name.c_str();
      e.info.description = e.description.c_str();
      e.info.unavailable_reason = e.unavailable_reason.c_str();
      e.info.variant_of = e.variant_of.c_str();
    }
    *list = owned.release();
  });
}

uint64_t logprobs_backend_list_count(const logprobs_backend_list* list) {
  return list == nullptr ? 0 : list->entries.size();
}

logprobs_status logprobs_backend_list_get(const logprobs_backend_list* list, uint64_t index,
                                          logprobs_backend_info* info, logprobs_error** error) {
  return guarded(error, [&] {
    const logprobs_backend_list& l = required(list, "list");
    if (index >= l.entries.size())
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("backend index {} is past the end of the list ({} backends)", index, l.entries.size()));
    required(info, "info") = l.entries[index].info;
  });
}

void logprobs_backend_list_free(logprobs_backend_list* list) { delete list; }

logprobs_status logprobs_run(const char* backend, const logprobs_batch_view* batch, uint32_t k, int32_t ranks,
                             logprobs_result** result, logprobs_error** error) {
  return guarded(error, [&] { run_into(runnable_backend(backend), batch, k, ranks, result); });
}

logprobs_status logprobs_reference(const logprobs_batch_view* batch, uint32_t k, int32_t ranks,
                                   logprobs_result** result, logprobs_error** error) {
  return guarded(error, [&] { run_into(reference_backend(), batch, k, ranks, result); });
}

}  // extern "C"
