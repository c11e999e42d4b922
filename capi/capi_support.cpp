#include "capi_support.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>

#include "logprobs/errors.hpp"

namespace logprobs::capi {
namespace {

template <typename T>
std::span<const T> array(const char* name, const T* data, std::uint64_t count) {
  if (data == nullptr && count > 0)
    throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("{} is NULL but its count is {}", name, count));
  return {data, static_cast<std::size_t>(count)};
}

// rows * columns, refused when it overflows (the arrays could not hold it).
std::uint64_t elements(const logprobs_result_view& view) {
  if (view.columns != 0 && view.rows > std::numeric_limits<std::uint64_t>::max() / 8 / view.columns)
    throw Failure(LOGPROBS_INVALID_ARGUMENT,
                  fmt::format("a result of {} rows and {} columns does not fit in memory", view.rows, view.columns));
  return view.rows * view.columns;
}

template <typename T>
std::vector<T> copied(const char* name, const T* data, std::uint64_t count) {
  const std::span<const T> values = array(name, data, count);
  return {values.begin(), values.end()};
}

}  // namespace

logprobs_status fail(logprobs_error** error, logprobs_status status, const char* message) noexcept {
  if (error != nullptr) {
    try {
      *error = new logprobs_error{status, message};
    } catch (...) {
      *error = nullptr;
    }
  }
  return status;
}

logprobs_status fail_with_current_exception(logprobs_error** error) noexcept {
  // The most specific types first: InvalidBatch and UnsupportedPart are invalid_arguments.
  try {
    throw;
  } catch (const Failure& e) {
    return fail(error, e.status, e.what());
  } catch (const InvalidBatch& e) {
    return fail(error, LOGPROBS_INVALID_BATCH, e.what());
  } catch (const UnsupportedPart& e) {
    return fail(error, LOGPROBS_UNSUPPORTED_PART, e.what());
  } catch (const FileError& e) {
    return fail(error, LOGPROBS_FILE_ERROR, e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    return fail(error, LOGPROBS_FILE_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return fail(error, LOGPROBS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(error, LOGPROBS_INTERNAL_ERROR, e.what());
  } catch (...) {
    return fail(error, LOGPROBS_INTERNAL_ERROR, "an exception that is not a std::exception");
  }
}

RaggedBatch to_batch(const logprobs_batch_view* view) {
  const logprobs_batch_view& v = required(view, "batch");
  RaggedBatch batch;
  // An out-of-range dtype is SPEC §4's "unknown logits dtype", reported as validation reports it.
  if (v.dtype < 0 || v.dtype > 255) throw InvalidBatch(fmt::format("logits: unknown dtype (value {})", v.dtype));
  batch.logits = v.logits;
  batch.dtype = static_cast<LogitsDtype>(v.dtype);
  batch.rows = v.rows;
  batch.vocab = v.vocab;
  batch.row_stride = v.row_stride;
  batch.tokens = array("tokens", v.tokens, v.tokens_count);
  batch.sampled_tokens = array("sampled_tokens", v.sampled_tokens, v.batch_size);
  batch.logit_row_offsets = array("logit_row_offsets", v.logit_row_offsets, v.logit_row_offsets_count);
  batch.token_row_offsets = array("token_row_offsets", v.token_row_offsets, v.token_row_offsets_count);
  batch.lp_output_offsets = array("lp_output_offsets", v.lp_output_offsets, v.lp_output_offsets_count);
  if (v.has_temperatures) batch.temperatures = array("temperatures", v.temperatures, v.temperatures_count);
  return batch;
}

logprobs_batch_view to_view(const RaggedBatch& batch) {
  logprobs_batch_view v{};
  v.logits = batch.logits;
  v.dtype = static_cast<std::int32_t>(batch.dtype);
  v.rows = batch.rows;
  v.vocab = batch.vocab;
  v.row_stride = batch.row_stride;
  v.tokens = batch.tokens.data();
  v.tokens_count = batch.tokens.size();
  v.sampled_tokens = batch.sampled_tokens.data();
  v.batch_size = batch.sampled_tokens.size();
  v.logit_row_offsets = batch.logit_row_offsets.data();
  v.logit_row_offsets_count = batch.logit_row_offsets.size();
  v.token_row_offsets = batch.token_row_offsets.data();
  v.token_row_offsets_count = batch.token_row_offsets.size();
  v.lp_output_offsets = batch.lp_output_offsets.data();
  v.lp_output_offsets_count = batch.lp_output_offsets.size();
  v.has_temperatures = batch.has_temperatures() ? 1 : 0;
  if (batch.temperatures) {
    v.temperatures = batch.temperatures->data();
    v.temperatures_count = batch.temperatures->size();
  }
  return v;
}

BatchData copy_batch(const RaggedBatch& batch) {
  if (batch.dtype != LogitsDtype::f32 && batch.dtype != LogitsDtype::bf16 && batch.dtype != LogitsDtype::f16)
    throw InvalidBatch(fmt::format("logits: unknown dtype (value {})", static_cast<int>(batch.dtype)));
  BatchData data;
  data.dtype = batch.dtype;
  data.rows = batch.rows;
  data.vocab = batch.vocab;
  data.row_stride = batch.row_stride;
  if (batch.row_stride != 0 && batch.rows > std::numeric_limits<std::uint64_t>::max() / 8 / batch.row_stride)
    throw Failure(LOGPROBS_INVALID_ARGUMENT,
                  fmt::format("logits of {} rows of stride {} do not fit in memory", batch.rows, batch.row_stride));
  const std::uint64_t count = batch.rows * batch.row_stride;
  if (batch.logits == nullptr && count > 0)
    throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("logits is NULL but the batch has {} elements", count));
  // Copied as bytes: SPEC §1 allows logits at any alignment.
  void* into = nullptr;
  if (batch.dtype == LogitsDtype::f32) {
    data.logits.resize(count);
    into = data.logits.data();
  } else {
    data.logits16.resize(count);
    into = data.logits16.data();
  }
  if (count > 0) std::memcpy(into, batch.logits, count * dtype_bytes(batch.dtype));
  data.tokens.assign(batch.tokens.begin(), batch.tokens.end());
  data.sampled_tokens.assign(batch.sampled_tokens.begin(), batch.sampled_tokens.end());
  data.logit_row_offsets.assign(batch.logit_row_offsets.begin(), batch.logit_row_offsets.end());
  data.token_row_offsets.assign(batch.token_row_offsets.begin(), batch.token_row_offsets.end());
  data.lp_output_offsets.assign(batch.lp_output_offsets.begin(), batch.lp_output_offsets.end());
  if (batch.temperatures)
    data.temperatures = std::vector<float>(batch.temperatures->begin(), batch.temperatures->end());
  return data;
}

ResultData copy_packed(const logprobs_result_view& view) {
  const std::uint64_t n = elements(view);
  ResultData result;
  result.rows = view.rows;
  result.width = view.columns;
  result.lp_logits = copied("lp_logits", view.lp_logits, n);
  result.lp_tokens = copied("lp_tokens", view.lp_tokens, n);
  result.ranks = view.has_ranks != 0;
  if (result.ranks) result.lp_ranks = copied("ranks", view.ranks, view.rows);
  return result;
}

SplitResult copy_split(const logprobs_result_view& view) {
  const std::uint64_t n = elements(view);
  SplitResult split;
  split.rows = view.rows;
  split.k = view.columns;
  split.top_tokens = copied("top_tokens", view.top_tokens, n);
  split.top_logprobs = copied("top_logprobs", view.top_logprobs, n);
  split.sampled_logprobs = copied("sampled_logprobs", view.sampled_logprobs, view.rows);
  if (view.has_ranks != 0) split.sampled_ranks = copied("ranks", view.ranks, view.rows);
  return split;
}

logprobs_result_view to_view(const logprobs_result& result) {
  logprobs_result_view v{};
  if (result.layout == ResultLayout::packed) {
    v.layout = LOGPROBS_PACKED;
    v.rows = result.packed.rows;
    v.columns = result.packed.width;
    v.lp_logits = result.packed.lp_logits.data();
    v.lp_tokens = result.packed.lp_tokens.data();
    v.has_ranks = result.packed.ranks ? 1 : 0;
    v.ranks = result.packed.lp_ranks.data();
  } else {
    v.layout = LOGPROBS_SPLIT;
    v.rows = result.split.rows;
    v.columns = result.split.k;
    v.top_tokens = result.split.top_tokens.data();
    v.top_logprobs = result.split.top_logprobs.data();
    v.sampled_logprobs = result.split.sampled_logprobs.data();
    v.has_ranks = result.split.sampled_ranks ? 1 : 0;
    if (result.split.sampled_ranks) v.ranks = result.split.sampled_ranks->data();
  }
  return v;
}

FileMetadata metadata_of(const char* const* keys, const char* const* values, std::uint64_t count) {
  array("metadata_keys", keys, count);
  array("metadata_values", values, count);
  FileMetadata metadata;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (keys[i] == nullptr || values[i] == nullptr)
      throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("metadata entry {} has a NULL key or value", i));
    metadata[keys[i]] = values[i];
  }
  return metadata;
}

Tolerance to_tolerance(const logprobs_tolerance* tolerance) {
  Tolerance t;
  if (tolerance == nullptr) return t;
  const std::pair<const char*, double> terms[] = {{"ulps", tolerance->ulps},
                                                  {"norm_ulps", tolerance->norm_ulps},
                                                  {"sigma", tolerance->sigma},
                                                  {"floor", tolerance->floor}};
  for (const auto& [name, value] : terms)
    if (!std::isfinite(value) || value < 0)
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("tolerance {} must be a finite number >= 0, got {}", name, value));
  if (tolerance->sum_rule < LOGPROBS_SUM_CALIBRATED || tolerance->sum_rule > LOGPROBS_SUM_SQRT)
    throw Failure(LOGPROBS_INVALID_ARGUMENT,
                  fmt::format("tolerance sum_rule must be LOGPROBS_SUM_CALIBRATED, _LINEAR or _SQRT (0..2), got {}",
                              tolerance->sum_rule));
  t.ulps = tolerance->ulps;
  t.norm_ulps = tolerance->norm_ulps;
  t.sigma = tolerance->sigma;
  t.sum_rule = static_cast<SumRule>(tolerance->sum_rule);
  t.floor = tolerance->floor;
  return t;
}

logprobs_tolerance from_tolerance(const Tolerance& tolerance) {
  return {tolerance.ulps, tolerance.norm_ulps, tolerance.sigma, static_cast<std::int32_t>(tolerance.sum_rule),
          tolerance.floor};
}

}  // namespace logprobs::capi
