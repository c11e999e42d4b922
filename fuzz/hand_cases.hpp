// Small deterministic batches, one per SPEC §2/§3 situation and contract-v2 part, that the
// campaign runs before its random batches: a backend that gets one of these wrong fails on a
// case a person can read.
#pragma once

#include <string>
#include <vector>

#include "harness/batch_data.hpp"

namespace logprobs {

struct HandCase {
  std::string name;  // what the case covers, e.g. "only -inf row"
  BatchData batch;   // valid at every K 0..65535
};

std::vector<HandCase> hand_cases();

}  // namespace logprobs
