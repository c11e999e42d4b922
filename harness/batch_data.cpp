#include "batch_data.hpp"

#include <algorithm>
#include <cstring>

namespace logprobs {
namespace {

// memcmp of two empty arrays would pass it null pointers, which UBSan rightly rejects.
template <typename T>
bool same_bytes(const T* a, const T* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0;
}

}  // namespace

RaggedBatch BatchData::view() const {
  RaggedBatch v;
  v.logits = logit_bytes().data();
  v.dtype = dtype;
  v.rows = rows;
  v.vocab = vocab;
  v.row_stride = row_stride;
  v.tokens = tokens;
  v.sampled_tokens = sampled_tokens;
  v.logit_row_offsets = logit_row_offsets;
  v.token_row_offsets = token_row_offsets;
  v.lp_output_offsets = lp_output_offsets;
  if (temperatures) v.temperatures = std::span<const float>(*temperatures);
  return v;
}

float BatchData::logit(std::uint64_t i, std::uint64_t j) const {
  const std::byte* at = logit_bytes().data() + (i * row_stride + j) * dtype_bytes(dtype);
  if (dtype == LogitsDtype::f32) {
    float x;
    std::memcpy(&x, at, sizeof x);  // a mapped file's logits need not be aligned
    return x;
  }
  std::uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return dtype == LogitsDtype::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
}

std::span<const std::byte> BatchData::logit_bytes() const {
  if (logits_owner) return mapped_logits;
  return dtype == LogitsDtype::f32 ? std::as_bytes(std::span(logits)) : std::as_bytes(std::span(logits16));
}

void BatchData::own_logits() {
  if (!logits_owner) return;
  const std::span<const std::byte> bytes = mapped_logits;
  if (dtype == LogitsDtype::f32) {
    logits.resize(bytes.size() / sizeof(float));
    std::memcpy(logits.data(), bytes.data(), bytes.size());
  } else {
    logits16.resize(bytes.size() / sizeof(std::uint16_t));
    std::memcpy(logits16.data(), bytes.data(), bytes.size());
  }
  mapped_logits = {};
  logits_owner.reset();
}

bool same_bits(const ResultData& a, const ResultData& b) {
  return a.rows == b.rows && a.width == b.width && a.ranks == b.ranks && a.lp_tokens == b.lp_tokens &&
         a.lp_ranks == b.lp_ranks && a.lp_logits.size() == b.lp_logits.size() &&
         same_bytes(a.lp_logits.data(), b.lp_logits.data(), a.lp_logits.size());
}

bool same_row_bits(const ResultData& a, std::uint64_t row_a, const ResultData& b, std::uint64_t row_b) {
  if (a.width != b.width || a.ranks != b.ranks || row_a >= a.rows || row_b >= b.rows) return false;
  const std::uint64_t w = a.width;
  return same_bytes(&a.lp_tokens[row_a * w], &b.lp_tokens[row_b * w], w) &&
         same_bytes(&a.lp_logits[row_a * w], &b.lp_logits[row_b * w], w) &&
         (!a.ranks || a.lp_ranks[row_a] == b.lp_ranks[row_b]);
}

BatchData single_row_batch(std::span<const float> x, std::uint32_t token) {
  BatchData one;
  one.vocab = one.row_stride = x.size();
  one.rows = 1;
  one.logits.assign(x.begin(), x.end());
  one.sampled_tokens = {token};
  one.logit_row_offsets = one.lp_output_offsets = {0, 1};
  one.token_row_offsets = {0, 0};
  return one;
}

BatchData row_alone(const BatchData& batch, const RowTask& task) {
  BatchData one;
  one.dtype = batch.dtype;
  one.vocab = one.row_stride = batch.vocab;
  one.rows = 1;
  const std::byte* row = batch.view().row_bytes(task.logit_row);
  if (batch.dtype == LogitsDtype::f32) {
    one.logits.resize(batch.vocab);
    std::memcpy(one.logits.data(), row, batch.vocab * sizeof(float));
  } else {
    one.logits16.resize(batch.vocab);
    std::memcpy(one.logits16.data(), row, batch.vocab * sizeof(std::uint16_t));
  }
  one.sampled_tokens = {task.token};
  one.logit_row_offsets = one.lp_output_offsets = {0, 1};
  one.token_row_offsets = {0, 0};
  if (batch.temperatures) one.temperatures = std::vector<float>{(*batch.temperatures)[task.batch_item]};
  return one;
}

ResultData run_backend(const Backend& backend, const BatchData& batch, std::uint32_t k, bool ranks) {
  const OutputShape shape = validate_batch(batch.view(), k);
  ResultData result(shape.rows, shape.width, ranks);
  backend.run(batch.view(), k, result.view());
  return result;
}

BatchData without_item(const BatchData& batch, std::size_t b) {
  BatchData out = batch;
  out.own_logits();
  const auto erase_item = [b](std::vector<std::uint32_t>& offsets) {
    const std::uint32_t removed = offsets[b + 1] - offsets[b];
    for (std::size_t i = b + 2; i < offsets.size(); ++i) offsets[i] -= removed;
    offsets.erase(offsets.begin() + std::ptrdiff_t(b) + 1);
  };
  const std::uint64_t first_row = batch.logit_row_offsets[b], end_row = batch.logit_row_offsets[b + 1];
  const auto erase_rows = [&](auto& logits) {
    const std::size_t size = logits.size();  // rows * row_stride, or less if the last row is short
    if (size != 0)
      logits.erase(logits.begin() + std::ptrdiff_t(std::min<std::uint64_t>(first_row * batch.row_stride, size)),
                   logits.begin() + std::ptrdiff_t(std::min<std::uint64_t>(end_row * batch.row_stride, size)));
  };
  erase_rows(out.logits);
  erase_rows(out.logits16);
  out.rows -= end_row - first_row;
  out.tokens.erase(out.tokens.begin() + batch.token_row_offsets[b],
                   out.tokens.begin() + batch.token_row_offsets[b + 1]);
  out.sampled_tokens.erase(out.sampled_tokens.begin() + std::ptrdiff_t(b));
  if (out.temperatures) out.temperatures->erase(out.temperatures->begin() + std::ptrdiff_t(b));
  erase_item(out.logit_row_offsets);
  erase_item(out.token_row_offsets);
  erase_item(out.lp_output_offsets);
  return out;
}

}  // namespace logprobs
