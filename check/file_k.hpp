// The K a file command (run, verify, compare) judges at, and a result's shape held to it.
#pragma once

#include <cstdint>

#include "commands.hpp"
#include "harness/batch_file.hpp"

namespace logprobs::cli {

// --k or --levels, else the batch file's metadata, else (for verify) the result file's metadata
// or its shape. UsageError when none says.
std::uint32_t k_for(const FileArgs& args, const BatchFile& file, const ResultFile* result = nullptr);

// UsageError when the result's shape says another K than k (in the result's own layout).
void check_result_k(const FileArgs& args, const ResultFile& got, std::uint32_t k);

}  // namespace logprobs::cli
