// The public contract, part 3: validation (SPEC §4).
#pragma once

#include <cstdint>

#include "logprobs/batch.hpp"
#include "logprobs/errors.hpp"

namespace logprobs {

struct OutputShape {
  std::uint64_t rows;   // N = lp_output_offsets[B]
  std::uint64_t width;  // W = 2^levels
};

// Every SPEC §4 rule about the batch and levels; throws InvalidBatch on the first broken one.
// Reads only the offset and token arrays, never the logits.
OutputShape validate_batch(const RaggedBatch& batch, int levels);

// The same, plus the rule that the outputs have shape [N, W].
void validate_batch(const RaggedBatch& batch, int levels, const LogprobsOutput& out);

}  // namespace logprobs
