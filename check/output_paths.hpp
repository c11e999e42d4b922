// What the commands check of the paths they will write, before any work: a fault found only when
// the result is ready (or, in the campaign, at the first failure) costs the run its verdict.
#pragma once

#include <string>
#include <vector>

namespace logprobs::cli {

// A path as the user gave it, with the option that gave it ("--output") and, for an output, what
// it will hold, for messages.
struct NamedPath {
  std::string option;
  std::string path;
  std::string holds = "a report";
};

// Throws UsageError naming the option when an output
// - is one of the inputs: the same device and inode, so a symbolic or hard link to an input
//   counts (writing it would destroy the input before, or while, it is read);
// - is another output of the run (by any name, as same_file says);
// - exists and is not a regular file (a folder, a FIFO, a device: refused, never replaced);
// - lies in a folder that does not exist, is not a folder, or is not writable.
// Empty paths (an option not given) are skipped.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// Throws UsageError naming the option unless `folder` is a writable folder, or does not exist
// and its nearest existing ancestor is one (the campaign creates it at the first failure).
void check_output_folder(const NamedPath& folder);

}  // namespace logprobs::cli
