// SPEC §5: whether a backend's result agrees with the input and the reference. The one place
// that the tests, the campaign and `logprobs-check verify` judge a result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batch_data.hpp"

namespace logprobs {

struct Tolerance {
  double atol = 1e-5;  // scaled by max(1, |m|), m the row's largest logit
  double ulps = 4;     // units in the last place of the reference value
};

// One broken rule, located. message() reads like
// "batch 2, output row 7, slot 3: token 17 got -1.25 want -1.5 (value off by 0.25 > 1.2e-5)".
struct Violation {
  std::uint64_t batch = 0;
  std::uint64_t output_row = 0;
  std::uint64_t slot = 0;
  std::uint32_t token = 0;
  std::string what;  // which rule, with got and want
  std::string message() const;
};

// The largest errors seen against the reference, over values that were compared (also when
// they passed). NaN and infinities, which must match exactly, do not count here.
struct ErrorStats {
  std::uint64_t rows = 0;
  double max_abs_error = 0;
  double max_ulp_error = 0;
  void merge(const ErrorStats& other);
};

struct Verdict {
  std::vector<Violation> violations;  // empty when the result agrees
  ErrorStats stats;
  bool ok() const { return violations.empty(); }
};

// Judges `got` (any implementation's output for `batch` at `levels`) against the input and the
// reference backend's `reference` output, as SPEC §5 says: tokens exact and tie-aware, padding
// count exact, values within tolerance. A result of the wrong shape is one violation.
Verdict compare_result(const BatchData& batch, int levels, const ResultData& reference, const ResultData& got,
                       const Tolerance& tolerance = {});

}  // namespace logprobs
