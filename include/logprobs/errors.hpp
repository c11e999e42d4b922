// The public contract, part 2: the errors of SPEC §4.
#pragma once

#include <stdexcept>

namespace logprobs {

// Raised for any input that breaks SPEC §4, before a backend reads memory. The message names
// the field, the batch index where there is one, and the offending values.
class InvalidBatch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Raised when a backend is asked for an optional part of the contract it does not implement
// (16-bit logits, temperatures, ranks, a K not of the form 2^L - 1), before it reads anything.
// A valid batch, not a malformed one: the message names the backend and the part.
class UnsupportedPart : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace logprobs
