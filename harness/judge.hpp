// One backend run on one batch and judged against the reference's result (SPEC §5): what the
// campaign, `compare` and the tests do for every case.
#pragma once

#include <string>

#include "comparator.hpp"

namespace logprobs {

struct BackendOutcome {
  Verdict verdict;
  std::string error;   // what the backend threw, if it threw (then verdict is empty)
  double seconds = 0;  // time spent in the backend's run()
  bool ok() const { return error.empty() && verdict.ok(); }
};

// Runs `backend` on `batch` at `levels` (an exception it throws becomes outcome.error) and judges
// the result against `reference`, the reference backend's result for the same batch and levels.
BackendOutcome judge_backend(const Backend& backend, const BatchData& batch, int levels, const ResultData& reference,
                             const Tolerance& tolerance);

// `got`, from any implementation, judged against the reference backend's result for the batch.
Verdict judge_against_reference(const BatchData& batch, int levels, const ResultData& got,
                                const Tolerance& tolerance = {});

}  // namespace logprobs
