// The public contract, part 2: the one error type (SPEC §4).
#pragma once

#include <stdexcept>

namespace logprobs {

// Raised for any input that breaks SPEC §4, before a backend reads memory. The message names
// the field, the batch index where there is one, and the offending values.
class InvalidBatch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace logprobs
