// --verify: whether one benchmarked output computes the contract, judged by the harness's
// comparator against the reference (the smoke ctest uses it), so that what is timed, the libtorch
// peer included, is known to be the right answer.
#pragma once

#include <string>

#include "harness/comparator.hpp"

namespace logprobs::bench {

// An empty string when `out` agrees with the reference on `batch` at top-K width `k` (SPEC §5); else
// the first violation, naming the output row and slot, and how many there were.
std::string check_outputs(const BatchData& batch, std::uint32_t k, const ResultData& out,
                          const Tolerance& tolerance = {});

}  // namespace logprobs::bench
