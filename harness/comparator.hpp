// SPEC §5: whether a backend's result agrees with the input and the reference. The one place
// that the tests, the campaign and `logprobs-check verify` judge a result.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batch_data.hpp"
#include "memory_budget.hpp"

namespace logprobs {

// A value v with reference value ref, in a row of V logits whose largest finite x is m, agrees
// when (SPEC §5)
//
//   |v - ref| <= ulps * ulp(ref) + norm_ulps * ulp(|m| + log V) + sum_err(row)
//
// with ulp(y) the spacing of f32 values at |y|. The first term is the output's own rounding; the
// second the rounding of the normalizer n, whose size is about |m| + log S <= |m| + log V; the
// third the error of the sum S = sum_j exp(x_j - m), which log S turns into the same absolute
// error of every value of the row. How sum_err is found is the sum rule:
enum class SumRule : std::uint8_t {
  // max(sigma * dev, floor * 2^-24), dev the largest drift of an honest f32 sum on THIS row
  // (sum_calibration.hpp): tight on the rows where every honest order is accurate, wide enough on
  // the confident rows where every order drifts. The default (contract v3).
  calibrated,
  // V * 2^-24: Higham's bound gamma_{V-1} for one f32 chain of V nonnegative terms (Accuracy and
  // Stability of Numerical Algorithms, 4.2), for a kernel that sums so (the `max` port reaches
  // 95% of it at V = 152064 on a row with one dominant logit and every other 16.6 below it).
  linear,
  // sigma * sqrt(V) * 2^-24: contract v2's rule, for comparing with earlier reports.
  sqrt,
};

// "calibrated", "linear", "sqrt".
const char* sum_rule_name(SumRule rule);
// The rule of that name, or nothing.
std::optional<SumRule> sum_rule_from_name(std::string_view name);

struct Tolerance {
  double ulps = 4;       // units in the last place of the f32 reference value
  double norm_ulps = 4;  // units in the last place of |m| + log V
  SumRule sum_rule = SumRule::calibrated;
  double sigma = 2;  // calibrated: sigma * dev; sqrt: sigma * sqrt(V) * 2^-24
  // calibrated: sum_err is at least floor * 2^-24, the relative error in S that an exp within
  // 4 ulp (4 * 2^-23 of each term at most) can leave in it, whatever the summation order.
  double floor = 8;
  bool operator==(const Tolerance&) const = default;
};

// What SPEC §5 allows on one row, found from the row's x alone: the terms that do not depend on
// the value judged.
struct RowTolerance {
  SumRule sum_rule = SumRule::calibrated;
  double dev = 0;      // calibrated: the largest drift of an honest f32 sum of the row; else 0
  double sum_err = 0;  // the summation term
  double normalizer_term = 0;  // norm_ulps * ulp(|m| + log V)
  double ulps = 0;
  // The error allowed between a value and its reference value `ref` in this row.
  double allowed(double ref) const;
};

// The tolerance of a row x (SPEC §2.5's x: widened, divided by the temperature). A row whose
// normalizer is NaN (SPEC §3) is not calibrated: its values must be NaN, which no tolerance
// loosens.
RowTolerance row_tolerance(std::span<const float> x, const Tolerance& tolerance);

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

inline constexpr std::size_t kRuleCount = 10;

const char* rule_name(Rule rule);
// The rule of that name, or nothing.
std::optional<Rule> rule_from_name(std::string_view name);

// The kind of row a figure was reached on, for reports: "confident" (the largest x holds at least
// half the probability: the row of a sure next token, where every other exponential is small
// beside the running sums and honest f32 sums drift most), "masked" (some -inf), "flat" (every
// finite x within 1 of the largest), else "spread".
struct RowShape {
  std::uint64_t vocab = 0;
  double top_probability = 0;  // exp(m - m) / S = 1 / S: the largest x's probability
  double finite_range = 0;     // the largest finite x minus the smallest
  std::uint64_t masked = 0;    // entries of -inf
  const char* kind() const;
};

RowShape row_shape(std::span<const float> x);

// One broken rule, located, with its row's tolerance. message() reads like
// "batch 2, output row 7, slot 3: token 17 got -1.25 want -1.5 (value off by 0.25 > 1.2e-05;
// sum_err 4.77e-07 by the calibrated rule, dev 1.3e-07)".
struct Violation {
  Rule rule = Rule::value;
  std::uint64_t batch = 0;
  std::uint64_t output_row = 0;
  std::uint64_t slot = 0;
  std::uint32_t token = 0;
  std::string what;        // the rule broken, with got and want
  RowTolerance tolerance;  // its row's (what a value violation's allowed error is built on)
  std::string message() const;
};

// Where a figure was reached: the row, its kind and its tolerance.
struct RowLocation {
  std::uint64_t batch = 0;
  std::uint64_t output_row = 0;
  RowShape shape;
  RowTolerance tolerance;
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
  std::optional<RowLocation> max_tolerance_row;  // where max_tolerance_used was reached
  void merge(const ErrorStats& other);
};

// An output row with at least one violation, and every rule it broke: kept for every failing row
// whether or not its violations are, so the diagnosis (diagnosis.hpp) knows which rows to read.
struct FailedRow {
  std::uint64_t output_row = 0;
  std::uint32_t rules = 0;  // bit (1 << Rule) for each rule broken
  bool broke(Rule rule) const { return (rules >> static_cast<unsigned>(rule) & 1u) != 0; }
};

// A badly wrong result breaks a rule at every slot (4.2 M violations in a 32 MiB result), so a
// verdict counts every violation, by rule, but keeps only the first ones in row order.
struct Verdict {
  std::vector<Violation> violations;  // the first ones in row order, at most the limit judged by
  std::uint64_t violation_count = 0;  // every violation found, kept or not
  std::array<std::uint64_t, kRuleCount> rule_counts{};  // violation_count by rule (indexed by Rule)
  // Ascending, each row once, complete whatever the limit (at most one per output row, so
  // bounded by the result: compare_result charges it); none for a result of the wrong shape.
  std::vector<FailedRow> failed_rows;
  ErrorStats stats;
  bool ok() const { return violation_count == 0; }
  std::uint64_t count(Rule rule) const { return rule_counts[static_cast<std::size_t>(rule)]; }
  // Counted but not kept.
  std::uint64_t dropped() const { return violation_count - violations.size(); }
};

// How many violations a verdict keeps (every one is counted): the first `max_kept` in row order,
// whatever the number of threads that judged. With a budget, what the kept violations and the
// failed rows can take is charged to it before any row is judged.
inline constexpr std::uint64_t kDefaultKeptViolations = 1000;
struct KeptViolations {
  std::uint64_t max_kept = kDefaultKeptViolations;
  MemoryBudget* budget = nullptr;
};

// The memory one kept violation is charged at: the struct (three times: a block's vector grown
// by doubling, and the verdict's) and its text (under 256 bytes: numbers and fixed words).
inline constexpr std::uint64_t kKeptViolationBytes = 3 * sizeof(Violation) + 256;
// The memory charged for judging a result of `rows` x `width` keeping `max_kept` violations: the
// kept violations (at most 3 W + 2 a row), the failed rows (one a row, held in blocks and merged:
// three copies at most) and the plan of the rows.
std::uint64_t verdict_bytes(std::uint64_t rows, std::uint64_t width, std::uint64_t max_kept);

// Judges `got` (any implementation's output for `batch` at top-K width `k`) against the input
// and the reference backend's `reference` output, as SPEC §5 and §6 say: tokens exact and
// tie-aware, padding count exact, ranks exact when `got` has them, the evaluated token's top
// slot the same bits as its last slot, values within tolerance. A result of the wrong shape is
// one violation. Throws InvalidBatch if the batch itself breaks SPEC §4, and
// std::invalid_argument if `reference` is not of shape [N, W].
// Keeps the violations `kept` says (MemoryBudgetExceeded when its budget cannot take them).
Verdict compare_result(const RaggedBatch& batch, std::uint32_t k, const ResultData& reference, const ResultData& got,
                       const Tolerance& tolerance = {}, const KeptViolations& kept = {});
inline Verdict compare_result(const BatchData& batch, std::uint32_t k, const ResultData& reference,
                              const ResultData& got, const Tolerance& tolerance = {},
                              const KeptViolations& kept = {}) {
  return compare_result(batch.view(), k, reference, got, tolerance, kept);
}

// SPEC §5's rule for one value of a row: NaN matches NaN, an infinity the same infinity, anything
// else within row.allowed(want) of `want`, the reference's value.
bool value_agrees(float got, float want, const RowTolerance& row);

// |got - want| / row.allowed(want), the share of the tolerance a value uses (infinite where none
// is allowed); 0 where either is NaN or infinite, which must match exactly.
double share_used(float got, float want, const RowTolerance& row);

// The largest finite x of a row, 0 when it has none: SPEC §5's m.
double largest_finite_logit(std::span<const float> x);

// SPEC §2.9: the number of x_j >= x_s (NaN never counted; 0 when x_s is NaN).
std::uint32_t rank_of(std::span<const float> x, std::uint32_t s);

// The spacing of f32 values at |value| (the smallest subnormal at 0).
double ulp_f32(float value);

}  // namespace logprobs
