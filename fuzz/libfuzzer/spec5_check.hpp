// SPEC §5 for the differential fuzz target: whether a result agrees with the input and the
// reference. harness/comparator.hpp's compare_result is the project's one judge of results;
// this local copy of its rules serves only until that is merged, and fuzz_differential is then
// to call compare_result instead and this file to go.
#pragma once

#include <string>
#include <vector>

#include "batch_data.hpp"

namespace logprobs::fuzz {

// Each broken rule as "output row O, slot S: what" (empty when `got` agrees). Default tolerance:
// atol 1e-5 scaled by max(1, |m|), plus 4 ulps of the reference value.
std::vector<std::string> spec5_violations(const BatchData& batch, int levels, const ResultData& reference,
                                          const ResultData& got);

}  // namespace logprobs::fuzz
