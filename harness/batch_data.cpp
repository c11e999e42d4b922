#include "batch_data.hpp"

#include <algorithm>
#include <cstring>

namespace logprobs {

bool same_bits(const ResultData& a, const ResultData& b) {
  // memcmp of an empty result would pass it a null pointer, which UBSan rightly rejects.
  return a.rows == b.rows && a.width == b.width && a.lp_tokens == b.lp_tokens &&
         a.lp_logits.size() == b.lp_logits.size() &&
         (a.lp_logits.empty() ||
          std::memcmp(a.lp_logits.data(), b.lp_logits.data(), a.lp_logits.size() * sizeof(float)) == 0);
}

bool same_row_bits(const ResultData& a, std::uint64_t row_a, const ResultData& b, std::uint64_t row_b) {
  if (a.width != b.width || row_a >= a.rows || row_b >= b.rows) return false;
  const std::uint64_t w = a.width;
  return std::equal(a.lp_tokens.begin() + row_a * w, a.lp_tokens.begin() + (row_a + 1) * w,
                    b.lp_tokens.begin() + row_b * w) &&
         std::memcmp(&a.lp_logits[row_a * w], &b.lp_logits[row_b * w], w * sizeof(float)) == 0;
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

ResultData run_backend(const Backend& backend, const BatchData& batch, int levels) {
  const OutputShape shape = validate_batch(batch.view(), levels);
  ResultData result(shape.rows, shape.width);
  backend.run(batch.view(), levels, result.view());
  return result;
}

}  // namespace logprobs
