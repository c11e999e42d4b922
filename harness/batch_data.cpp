#include "batch_data.hpp"

#include <cstring>

namespace logprobs {

bool same_bits(const ResultData& a, const ResultData& b) {
  // memcmp of an empty result would pass it a null pointer, which UBSan rightly rejects.
  return a.rows == b.rows && a.width == b.width && a.lp_tokens == b.lp_tokens &&
         a.lp_logits.size() == b.lp_logits.size() &&
         (a.lp_logits.empty() ||
          std::memcmp(a.lp_logits.data(), b.lp_logits.data(), a.lp_logits.size() * sizeof(float)) == 0);
}

ResultData run_backend(const Backend& backend, const BatchData& batch, int levels) {
  const OutputShape shape = validate_batch(batch.view(), levels);
  ResultData result(shape.rows, shape.width);
  backend.run(batch.view(), levels, result.view());
  return result;
}

}  // namespace logprobs
