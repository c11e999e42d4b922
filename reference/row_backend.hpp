// The skeleton the two plain backends share: each output row computed on its own by a plain
// function, the rows spread over OpenMP threads. Rows are independent (SPEC §2), so the thread
// count changes nothing but the time.
#pragma once

#include <memory>
#include <string>

#include "logprobs/backend.hpp"

namespace logprobs {

// Computes output row task.output_row of `out` (and its rank, when out.ranks).
using RowFunction = void (*)(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const LogprobsOutput& out);

struct RowBackendInfo {
  std::string name;
  std::string description;
  Features features;
  bool sums_in_one_chain = false;
  bool claims_canonical_arithmetic = false;
};

std::unique_ptr<Backend> make_row_backend(RowBackendInfo info, RowFunction row);

}  // namespace logprobs
