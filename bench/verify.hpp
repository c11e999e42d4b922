// A sanity check of one benchmarked output against its input, computed here in double precision
// (--verify; the smoke ctest uses it). It proves that what is timed computes the contract, the
// libtorch peer included; the harness's comparator remains the real correctness check.
#pragma once

#include <string>

#include "batch_data.hpp"

namespace logprobs::bench {

// An empty string when `out` holds SPEC §2's answer for a benchmark batch (finite logits, output
// row i = logit row i) within a loose tolerance; else what is wrong, naming the row and slot.
std::string check_outputs(const BatchData& batch, int levels, const ResultData& out);

}  // namespace logprobs::bench
