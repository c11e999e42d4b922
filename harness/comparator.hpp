// SPEC §5: whether a backend's result agrees with the input and the reference. The one place
// that the tests, the campaign and `logprobs-check verify` judge a result.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "batch_data.hpp"

namespace logprobs {

// A value v with reference value ref, in a row of V logits whose largest finite logit is m,
// agrees when
//
//   |v - ref| <= atol * max(1, |m|) + ulps * ulp(ref) + summation * V * 2^-24.
//
// The first two terms are SPEC §5's. The third is the worst-case error of the normalizer of a
// backend that sums exp(x_j - m) in f32: an f32 sum of V nonnegative terms, in any order, has a
// relative error of at most gamma_{V-1} ~= (V - 1) * 2^-24 (Higham, Accuracy and Stability of
// Numerical Algorithms, 4.2), which log S turns into the same absolute error of every value. It
// is not slack: the `max` port reaches 95% of it at V = 152064 on a row with one dominant logit
// and every other logit 16.6 below it (each exp then just under half an ulp of the running
// sum, so each addition rounds), an LLM-like row. The remaining f32 errors (exp, x_j - m, log S)
// are O(2^-24 * log V), inside atol. summation = 0 gives SPEC's rule without the term.
struct Tolerance {
  double atol = 1e-5;     // scaled by max(1, |m|), m the row's largest finite logit
  double ulps = 4;        // units in the last place of the f32 reference value
  double summation = 1;   // multiple of the f32 summation bound V * 2^-24
};

// Which SPEC §5 rule a violation breaks.
enum class Rule {
  shape,              // the result is not [N, W]
  last_token,         // the last slot's token is not the evaluated token s
  token_range,        // a top token is neither below V nor the padding token V
  duplicate_token,    // a top token appears twice in the row
  not_candidate,      // a top token's logit is NaN or -inf
  not_top,            // the top tokens' logits are not the K largest candidate logits
  padding_count,      // more or fewer padding slots than K minus the number of candidates
  value,              // a value is outside tolerance, or NaN/inf where the reference differs
};

const char* rule_name(Rule rule);

// One broken rule, located. message() reads like
// "batch 2, output row 7, slot 3: token 17 got -1.25 want -1.5 (value off by 0.25 > 1.2e-5)".
struct Violation {
  Rule rule = Rule::value;
  std::uint64_t batch = 0;
  std::uint64_t output_row = 0;
  std::uint64_t slot = 0;
  std::uint32_t token = 0;
  std::string what;  // the rule broken, with got and want
  std::string message() const;
};

// The largest errors seen against the reference, over values that were compared (also when
// they passed). NaN and infinities, which must match exactly, do not count here.
struct ErrorStats {
  std::uint64_t rows = 0;
  std::uint64_t values = 0;   // finite values compared
  double max_abs_error = 0;
  // |got - ref| / ulp(ref), ulp of the f32 reference value. A log-probability near 0 (a token
  // of probability near 1) has a tiny ulp, so a small absolute error reads as a great many ULPs
  // there: read this next to max_abs_error.
  double max_ulp_error = 0;
  // max |got - ref| / allowed: the share of the tolerance used (<= 1 passes). Comparable across
  // rows of any scale and values of any size, so the figure to compare two backends' accuracy by.
  double max_tolerance_used = 0;
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
// Throws InvalidBatch if the batch itself breaks SPEC §4, and std::invalid_argument if
// `reference` is not of shape [N, W].
Verdict compare_result(const RaggedBatch& batch, int levels, const ResultData& reference, const ResultData& got,
                       const Tolerance& tolerance = {});
inline Verdict compare_result(const BatchData& batch, int levels, const ResultData& reference, const ResultData& got,
                              const Tolerance& tolerance = {}) {
  return compare_result(batch.view(), levels, reference, got, tolerance);
}

// The error allowed between a value and its reference value `ref` in a row of `vocab` logits
// whose largest finite logit is `row_max` (see Tolerance).
double allowed_error(double ref, double row_max, std::uint64_t vocab, const Tolerance& tolerance);

// SPEC §5's rule for one value: NaN matches NaN, an infinity the same infinity, anything else
// within allowed_error of `want`, the reference's value.
bool value_agrees(float got, float want, double row_max, std::uint64_t vocab, const Tolerance& tolerance);

// The largest finite logit of a row, 0 when it has none: the `row_max` of the rules above.
double largest_finite_logit(std::span<const float> x);

// The spacing of f32 values at |value| (the smallest subnormal at 0).
double ulp_f32(float value);

}  // namespace logprobs
