#include "split_result.hpp"

#include <algorithm>

namespace logprobs {

ResultData packed_from_split(const RaggedBatch& batch, const SplitResult& split) {
  ResultData packed(split.rows, split.k + 1, split.sampled_ranks.has_value());
  std::vector<std::uint32_t> evaluated(split.rows, static_cast<std::uint32_t>(batch.vocab));
  for (const RowTask& task : plan_rows(batch))
    if (task.output_row < split.rows) evaluated[task.output_row] = task.token;
  for (std::uint64_t o = 0; o < split.rows; ++o) {
    std::copy_n(split.top_tokens.begin() + std::ptrdiff_t(o * split.k), split.k, packed.view().row_tokens(o));
    std::copy_n(split.top_logprobs.begin() + std::ptrdiff_t(o * split.k), split.k, packed.view().row_values(o));
    packed.lp_tokens[o * packed.width + split.k] = evaluated[o];
    packed.lp_logits[o * packed.width + split.k] = split.sampled_logprobs[o];
  }
  if (split.sampled_ranks) packed.lp_ranks = *split.sampled_ranks;
  return packed;
}

SplitResult split_from_packed(const ResultData& packed) {
  SplitResult split;
  split.rows = packed.rows;
  split.k = packed.width - 1;
  for (std::uint64_t o = 0; o < packed.rows; ++o) {
    for (std::uint64_t slot = 0; slot < split.k; ++slot) {
      split.top_tokens.push_back(packed.token(o, slot));
      split.top_logprobs.push_back(packed.value(o, slot));
    }
    split.sampled_logprobs.push_back(packed.value(o, split.k));
  }
  if (packed.ranks) split.sampled_ranks = packed.lp_ranks;
  return split;
}

}  // namespace logprobs
