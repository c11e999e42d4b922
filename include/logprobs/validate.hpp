// The public contract, part 3: validation (SPEC §4).
#pragma once

#include <cstdint>

#include "logprobs/batch.hpp"
#include "logprobs/errors.hpp"

namespace logprobs {

struct OutputShape {
  std::uint64_t rows;   // N = lp_output_offsets[B]
  std::uint64_t width;  // W = K + 1
};

// Every SPEC §4 rule about the batch and K; throws InvalidBatch on the first broken one, in the
// SPEC's order. Reads only the offset, token and temperature arrays, never the logits.
OutputShape validate_batch(const RaggedBatch& batch, std::uint32_t k);

// The same, plus the rule that the outputs have shape [N, W] (and lp_ranks [N] when asked for).
void validate_batch(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out);

}  // namespace logprobs
