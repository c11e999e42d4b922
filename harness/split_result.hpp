// SPEC §7's split result layout, what vLLM, SGLang and TensorRT-LLM return: the top slots apart
// from the evaluated token's log-probability, which comes without its token id.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "batch_data.hpp"

namespace logprobs {

struct SplitResult {
  std::uint64_t rows = 0;                                   // N
  std::uint64_t k = 0;                                      // K
  std::vector<std::uint32_t> top_tokens;                    // [N, K], any slot order, padding V
  std::vector<float> top_logprobs;                          // [N, K]
  std::vector<float> sampled_logprobs;                      // [N]
  std::optional<std::vector<std::uint32_t>> sampled_ranks;  // [N]
};

// The packed result the split one stands for: each row's K top slots, then the evaluated token
// (taken from the batch, which the split layout does not repeat) with its log-probability, and
// the ranks. A split result of another row count than the batch's keeps its own shape (the
// comparator then reports the shape); rows past the batch's get token V in their last slot.
ResultData packed_from_split(const RaggedBatch& batch, const SplitResult& split);

// The split layout of a packed result (for tests and tools that emit it).
SplitResult split_from_packed(const ResultData& packed);

}  // namespace logprobs
