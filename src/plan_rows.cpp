// SPEC §2 steps 1-4: map each output row to its logit row and evaluated token.
#include "logprobs/batch.hpp"

namespace logprobs {

std::vector<RowTask> plan_rows(const RaggedBatch& batch) {
  const auto lro = batch.logit_row_offsets;
  const auto tro = batch.token_row_offsets;
  const auto loo = batch.lp_output_offsets;
  std::vector<RowTask> tasks;
  tasks.reserve(batch.output_rows());
  for (std::uint64_t b = 0; b < batch.batch_size(); ++b) {
    for (std::uint64_t o = loo[b]; o < loo[b + 1]; ++o) {
      const std::uint64_t r = loo[b + 1] - o - 1;  // rows after this one in the batch
      const std::uint32_t token = r == 0 ? batch.sampled_tokens[b] : batch.tokens[tro[b + 1] - r];
      tasks.push_back({o, lro[b + 1] - r - 1, token, static_cast<std::uint32_t>(b)});
    }
  }
  return tasks;
}

}  // namespace logprobs
