// The error of every file the harness reads or writes, apart so that the container, the atomic
// writer and the SPEC §7 mapping throw one type.
#pragma once

#include <stdexcept>

namespace logprobs {

// A file that is not a well-formed safetensors, batch or result file (a broken container, a
// missing tensor, a wrong dtype or shape), or one that cannot be read or written. Distinct from
// InvalidBatch, which says that well-formed arrays break SPEC §4; the command treats both as
// invalid input (exit 2). The message starts with the path.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace logprobs
