// --verify: whether one benchmarked output computes the contract, judged by the harness's
// comparator against the reference (the smoke ctest uses it), so that what is timed, the libtorch
// peer included, is known to be the right answer.
#pragma once

#include <string>

#include "harness/batch_data.hpp"

namespace logprobs::bench {

// An empty string when `out` agrees with the reference on `batch` at `levels` (SPEC §5); else
// the first violation, naming the output row and slot, and how many there were.
std::string check_outputs(const BatchData& batch, int levels, const ResultData& out);

}  // namespace logprobs::bench
