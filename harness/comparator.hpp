// SPEC §5: whether a backend's result agrees with the input and the reference. The one place
// that the tests, the campaign and `logprobs-check verify` judge a result.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "batch_data.hpp"

namespace logprobs {

// A value v with reference value ref, in a row of V logits whose largest finite x is m, agrees
// when
//
//   |v - ref| <= ulps * ulp(ref) + norm_ulps * ulp(|m| + log V) + sum_err(V)
//
// with ulp(y) the spacing of f32 values at |y|. The first term is the output's own rounding; the
// second the rounding of the normalizer n, whose size is about |m| + log S <= |m| + log V; the
// third the error of the sum S = sum_j exp(x_j - m), which log S turns into the same absolute
// error of every value: sigma * sqrt(V) * 2^-24 for a sum whose rounding errors do not all point
// one way (blocked, pairwise or multi-lane sums), or, for a backend that declares one f32 chain
// (linear_sum), V * 2^-24, Higham's bound gamma_{V-1} for a sum of V nonnegative terms (Accuracy
// and Stability of Numerical Algorithms, 4.2): the `max` port reaches 95% of it at V = 152064 on
// a row with one dominant logit and every other 16.6 below it, where each addition rounds.
struct Tolerance {
  double ulps = 4;          // units in the last place of the f32 reference value
  double norm_ulps = 4;     // units in the last place of |m| + log V
  double sigma = 2;         // sum_err(V) = sigma * sqrt(V) * 2^-24
  bool linear_sum = false;  // sum_err(V) = V * 2^-24 instead (one f32 chain)
};

// Which SPEC §5/§6 rule a violation breaks.
enum class Rule {
  shape,            // the result is not [N, W] (or its ranks not [N])
  last_token,       // the last slot's token is not the evaluated token s
  token_range,      // a top token is neither below V nor the padding token V
  duplicate_token,  // a top token appears twice in the row
  not_candidate,    // a top token's x is NaN or -inf
  not_top,          // the top tokens' x are not the K largest candidate x
  padding_count,    // more or fewer padding slots than K minus the number of candidates
  value,            // a value is outside tolerance, or NaN/inf where the reference differs
  rank,             // a reported rank is not the number of x_j >= x_s
  greedy_exact,     // s is among the top tokens, and its top value and last value differ in bits
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
  std::uint64_t values = 0;  // finite values compared
  double max_abs_error = 0;
  // |got - ref| / ulp(ref), over values with |ref| >= 2^-10 only: nearer 0 a tiny ulp makes the
  // figure meaningless (a log-probability near 0 is a token of probability near 1).
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

// Judges `got` (any implementation's output for `batch` at top-K width `k`) against the input
// and the reference backend's `reference` output, as SPEC §5 and §6 say: tokens exact and
// tie-aware, padding count exact, ranks exact when `got` has them, the evaluated token's top
// slot the same bits as its last slot, values within tolerance. A result of the wrong shape is
// one violation. Throws InvalidBatch if the batch itself breaks SPEC §4, and
// std::invalid_argument if `reference` is not of shape [N, W].
Verdict compare_result(const RaggedBatch& batch, std::uint32_t k, const ResultData& reference, const ResultData& got,
                       const Tolerance& tolerance = {});
inline Verdict compare_result(const BatchData& batch, std::uint32_t k, const ResultData& reference,
                              const ResultData& got, const Tolerance& tolerance = {}) {
  return compare_result(batch.view(), k, reference, got, tolerance);
}

// The error allowed between a value and its reference value `ref` in a row of `vocab` logits
// whose largest finite x is `row_max` (see Tolerance).
double allowed_error(double ref, double row_max, std::uint64_t vocab, const Tolerance& tolerance);

// SPEC §5's rule for one value: NaN matches NaN, an infinity the same infinity, anything else
// within allowed_error of `want`, the reference's value.
bool value_agrees(float got, float want, double row_max, std::uint64_t vocab, const Tolerance& tolerance);

// The largest finite x of a row, 0 when it has none: the `row_max` of the rules above.
double largest_finite_logit(std::span<const float> x);

// SPEC §2.9: the number of x_j >= x_s (NaN never counted; 0 when x_s is NaN).
std::uint32_t rank_of(std::span<const float> x, std::uint32_t s);

// The spacing of f32 values at |value| (the smallest subnormal at 0).
double ulp_f32(float value);

}  // namespace logprobs
