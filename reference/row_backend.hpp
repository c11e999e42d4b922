// The skeleton the two plain backends share: each output row computed on its own by a plain
// function, the rows spread over OpenMP threads. Rows are independent (SPEC §2), so the thread
// count changes nothing but the time.
#pragma once

#include <memory>
#include <string>

#include "logprobs/backend.hpp"

namespace logprobs {

// Computes output row task.output_row of `out`.
using RowFunction = void (*)(const RaggedBatch& batch, const RowTask& task, int levels, const LogprobsOutput& out);

std::unique_ptr<Backend> make_row_backend(std::string name, std::string description, RowFunction row);

}  // namespace logprobs
