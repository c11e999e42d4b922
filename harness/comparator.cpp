// SPEC §5 and §6, row by row: first the tokens (judged through the input, so any tie-breaking
// and any slot order pass), then ranks and greedy-exactness, then the values (against the
// reference, within tolerance).
// Over 400 lines: SPEC §5 and §6 are one rule set applied row by row; split, a row's rules and the
// facts they share would be read in two places.
#include "comparator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "logprobs/openmp.hpp"
#include "sum_calibration.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
// Below it the ULP error figure is not kept (ErrorStats::max_ulp_error).
constexpr double kUlpStatsFloor = 1.0 / 1024;
// A batch of fewer entries (rows x V) is judged on one thread: waking a team costs more (tens of
// microseconds) than its rows take.
constexpr std::uint64_t kSharedEntries = std::uint64_t{1} << 14;

// What the input says about one row, independent of any backend.
struct RowFacts {
  std::vector<float> x;            // SPEC §2.5's x: widened, divided by the temperature
  double row_max = 0;              // the largest finite x (0 if none)
  bool normalizer_is_nan = false;  // SPEC §3: NaN or +inf present, or only -inf
  std::vector<float> top_logits;   // the K largest candidate x, descending
  // The row's tolerance, whose calibration (SPEC §5's dev: the judge's most costly part) is done
  // only once `calibrated` is asked for; until then `tolerance` is the least the rule allows the
  // row (dev = 0), which bounds it from below.
  RowTolerance tolerance;
  bool calibration_pending = false;

  const RowTolerance& calibrated(const Tolerance& rule);
};

// The summation term of SPEC §5 under each rule.
double sum_error(SumRule rule, double dev, std::uint64_t vocab, const Tolerance& tolerance) {
  switch (rule) {
    case SumRule::calibrated:
      return std::max(tolerance.sigma * dev, std::ldexp(tolerance.floor, -24));
    case SumRule::linear:
      return std::ldexp(double(vocab), -24);
    case SumRule::sqrt:
      return tolerance.sigma * std::ldexp(std::sqrt(double(vocab)), -24);
  }
  return 0;
}

// The row's tolerance with dev = 0: the whole of it under the linear and sqrt rules and for a row
// whose normalizer is NaN, its least value under the calibrated rule.
RowTolerance uncalibrated_tolerance(std::uint64_t vocab, double row_max, const Tolerance& tolerance) {
  RowTolerance row;
  row.sum_rule = tolerance.sum_rule;
  row.ulps = tolerance.ulps;
  row.normalizer_term =
      tolerance.norm_ulps * ulp_f32(static_cast<float>(std::fabs(row_max) + std::log(double(vocab))));
  row.sum_err = sum_error(tolerance.sum_rule, 0, vocab, tolerance);
  return row;
}

bool needs_calibration(bool normalizer_is_nan, const Tolerance& tolerance) {
  return tolerance.sum_rule == SumRule::calibrated && !normalizer_is_nan;
}

void calibrate(std::span<const float> x, double row_max, const Tolerance& tolerance, RowTolerance& row) {
  row.dev = calibrate_sums(x, static_cast<float>(row_max)).dev();
  row.sum_err = sum_error(tolerance.sum_rule, row.dev, x.size(), tolerance);
}

// row_tolerance for a row whose facts are known: its largest finite x, and whether SPEC §3 makes
// its normalizer NaN (then there is nothing to calibrate).
RowTolerance tolerance_of_row(std::span<const float> x, double row_max, bool normalizer_is_nan,
                              const Tolerance& tolerance) {
  RowTolerance row = uncalibrated_tolerance(x.size(), row_max, tolerance);
  if (needs_calibration(normalizer_is_nan, tolerance)) calibrate(x, row_max, tolerance, row);
  return row;
}

const RowTolerance& RowFacts::calibrated(const Tolerance& rule) {
  if (calibration_pending) calibrate(x, row_max, rule, tolerance);
  calibration_pending = false;
  return tolerance;
}

bool is_candidate(float x) { return x > -kInf; }  // false for NaN and -inf

// The K largest candidate x, descending. `top` is a heap of the largest seen so far, its front
// the smallest of them, so a row costs a comparison per entry rather than a copy of every
// candidate and a sort of the copy; the multiset kept, and so the sorted result, is the same. A
// block of entries none of which exceeds that smallest is passed over in one vectorized test.
void largest_candidates(std::span<const float> x, std::uint32_t k, std::vector<float>& top) {
  top.clear();
  if (k == 0) return;
  constexpr std::size_t kBlock = 64;
  for (std::size_t begin = 0; begin < x.size(); begin += kBlock) {
    const std::size_t end = std::min(begin + kBlock, x.size());
    if (top.size() == k) {
      const float smallest = top.front();
      bool enters = false;
      for (std::size_t j = begin; j < end; ++j) enters |= x[j] > smallest;  // false for NaN
      if (!enters) continue;
    }
    for (std::size_t j = begin; j < end; ++j) {
      const float v = x[j];
      if (!is_candidate(v)) continue;
      if (top.size() < k) {
        top.push_back(v);
        std::push_heap(top.begin(), top.end(), std::greater<>());
      } else if (v > top.front()) {
        std::pop_heap(top.begin(), top.end(), std::greater<>());
        top.back() = v;
        std::push_heap(top.begin(), top.end(), std::greater<>());
      }
    }
  }
  std::sort_heap(top.begin(), top.end(), std::greater<>());
}

void read_facts(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const Tolerance& tolerance,
                RowFacts& facts) {
  facts.x.resize(batch.vocab);
  read_row(batch, task, facts.x);
  bool any_finite = false, nan_or_inf = false;
  for (const float v : facts.x) {
    nan_or_inf |= std::isnan(v) || v == kInf;
    any_finite |= std::isfinite(v);
  }
  facts.normalizer_is_nan = nan_or_inf || !any_finite;  // NaN or +inf present, or only -inf
  facts.row_max = largest_finite_logit(facts.x);
  facts.tolerance = uncalibrated_tolerance(facts.x.size(), facts.row_max, tolerance);
  facts.calibration_pending = needs_calibration(facts.normalizer_is_nan, tolerance);
  largest_candidates(facts.x, k, facts.top_logits);
}

// Bitwise equality, where any NaN equals any NaN (SPEC §6's greedy-exactness compares values).
bool same_value_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

class RowJudge {
 public:
  // Counts every violation into `verdict`, keeping the first `keep` of them.
  RowJudge(const RaggedBatch& batch, std::uint32_t k, const Tolerance& tolerance, Verdict& verdict,
           std::uint64_t keep)
      : batch_(batch), k_(k), width_(slots_per_row(k)), tolerance_(tolerance), verdict_(verdict), keep_(keep) {}

  void judge(const RowTask& task, const ResultData& reference, const ResultData& got) {
    b_ = task.batch_item;
    o_ = task.output_row;
    read_facts(batch_, task, k_, tolerance_, facts_);
    shape_.reset();
    ++verdict_.stats.rows;
    judge_tokens(task.token, got);
    if (got.ranks) judge_rank(task.token, got);
    judge_greedy_exact(task.token, got);
    judge_values(reference, got);
  }

 private:
  // `what()` gives the violation's text, formatted only when it is kept (a result wrong at every
  // slot has millions that are only counted).
  template <typename Text>
  void fail(Rule rule, std::uint64_t slot, std::uint32_t token, const Text& what) {
    ++verdict_.violation_count;
    ++verdict_.rule_counts[static_cast<std::size_t>(rule)];
    if (verdict_.violations.size() < keep_)
      verdict_.violations.push_back({rule, b_, o_, slot, token, what(), facts_.calibrated(tolerance_)});
    auto& rows = verdict_.failed_rows;
    if (rows.empty() || rows.back().output_row != o_) rows.push_back({o_, 0});
    rows.back().rules |= 1u << static_cast<unsigned>(rule);
  }

  void judge_tokens(std::uint32_t s, const ResultData& got) {
    const auto vocab = static_cast<std::uint32_t>(batch_.vocab);
    const std::vector<float>& x = facts_.x;
    if (got.token(o_, k_) != s)
      fail(Rule::last_token, k_, got.token(o_, k_),
           [&] { return fmt::format("last slot token got {} want {} (the evaluated token)", got.token(o_, k_), s); });
    // Which tokens this row has reported: one bit per token of V, set as they come and cleared
    // again after the row (only the words that were set), so a row costs O(K), not O(V), and no
    // hashing.
    seen_.resize((batch_.vocab + 63) / 64);
    std::vector<std::pair<float, std::uint64_t>>& reported = reported_;  // (x, slot) of each valid top token
    reported.clear();
    std::uint64_t padding = 0;
    for (std::uint64_t slot = 0; slot < k_; ++slot) {
      const std::uint32_t t = got.token(o_, slot);
      if (t == vocab) {
        ++padding;
      } else if (t > vocab) {
        fail(Rule::token_range, slot, t,
             [&] { return fmt::format("token got {} want a token below V = {} or padding {}", t, vocab, vocab); });
      } else if (!first_time_seen(t)) {
        fail(Rule::duplicate_token, slot, t,
             [&] { return fmt::format("token got {} want distinct top tokens ({} appears twice)", t, t); });
      } else if (!is_candidate(x[t])) {
        fail(Rule::not_candidate, slot, t,
             [&] { return fmt::format("token got {} with logit {} want a candidate (logit not NaN, > -inf)", t, x[t]); });
      } else {
        reported.emplace_back(x[t], slot);
      }
    }
    for (std::uint64_t slot = 0; slot < k_; ++slot)
      if (const std::uint32_t t = got.token(o_, slot); t < vocab) seen_[t / 64] = 0;
    const std::uint64_t want_padding = k_ - facts_.top_logits.size();
    if (padding != want_padding)
      fail(Rule::padding_count, k_ == 0 ? 0 : k_ - 1, vocab,
           [&] { return fmt::format("padding count got {} want {} ({} candidates for K = {})", padding, want_padding,
                       facts_.top_logits.size(), k_); });
    // Multiset of reported x against the K largest: compare both sorted descending; the first
    // place where they differ names the slot that holds an x too small.
    std::sort(reported.begin(), reported.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; i < reported.size() && i < facts_.top_logits.size(); ++i) {
      // Not a structured binding: Clang before 16 lets no lambda capture one (fuzz/build.sh
      // builds with Debian 12's Clang 14).
      const float logit = reported[i].first;
      const std::uint64_t slot = reported[i].second;
      if (logit != facts_.top_logits[i]) {
        fail(Rule::not_top, slot, got.token(o_, slot), [&] {
          return fmt::format("top token got {} with logit {} want a token with logit {} (the K largest candidate "
                             "logits are not all reported)",
                             got.token(o_, slot), logit, facts_.top_logits[i]);
        });
        break;
      }
    }
  }

  bool first_time_seen(std::uint32_t t) {
    std::uint64_t& word = seen_[t / 64];
    const std::uint64_t bit = std::uint64_t{1} << (t % 64);
    if (word & bit) return false;
    word |= bit;
    return true;
  }

  void judge_rank(std::uint32_t s, const ResultData& got) {
    const std::uint32_t want = rank_of(facts_.x, s);
    const std::uint32_t rank = got.lp_ranks[o_];
    if (rank != want)
      fail(Rule::rank, k_, s,
           [&] { return fmt::format("rank of token {} got {} want {} (the number of x_j >= x_s = {})", s, rank, want, facts_.x[s]); });
  }

  void judge_greedy_exact(std::uint32_t s, const ResultData& got) {
    const float last = got.value(o_, k_);
    for (std::uint64_t slot = 0; slot < k_; ++slot) {
      if (got.token(o_, slot) != s) continue;
      const float top = got.value(o_, slot);
      if (!same_value_bits(top, last))
        fail(Rule::greedy_exact, slot, s,
             [&] { return fmt::format("token {} is a top token with value {} but its last slot holds {} (greedy-exact: the same "
                         "bits, {:#010x} vs {:#010x})",
                         s, top, last, std::bit_cast<std::uint32_t>(top), std::bit_cast<std::uint32_t>(last)); });
    }
  }

  // Equal x have equal reference values (x + n, rounded once), so a token tied with one the
  // reference reported, but not reported by it, is judged by that equal x's value.
  void index_reference_values(const ResultData& reference) {
    const auto vocab = static_cast<std::uint32_t>(batch_.vocab);
    ref_by_logit_.clear();
    for (std::uint64_t slot = 0; slot < width_; ++slot) {
      const std::uint32_t t = reference.token(o_, slot);
      if (t < vocab && !std::isnan(facts_.x[t])) ref_by_logit_.emplace(facts_.x[t], reference.value(o_, slot));
    }
  }

  // Calls f(slot, token, got value, reference value) for each value of the row that has a
  // reference value to be judged by (index_reference_values first).
  template <class F>
  void for_each_value(const ResultData& reference, const ResultData& got, F&& f) {
    const auto vocab = static_cast<std::uint32_t>(batch_.vocab);
    const std::vector<float>& x = facts_.x;
    const float padding_value = facts_.normalizer_is_nan ? std::numeric_limits<float>::quiet_NaN() : -kInf;
    for (std::uint64_t slot = 0; slot < width_; ++slot) {
      const std::uint32_t t = got.token(o_, slot);
      const float v = got.value(o_, slot);
      if (slot == k_) {
        if (t == reference.token(o_, k_)) f(slot, t, v, reference.value(o_, k_));
      } else if (t == vocab) {
        // A padding value that is the padding value (-inf, or NaN in a row whose normalizer is
        // NaN, matched exactly whatever the tolerance) agrees and counts in no figure: only one
        // that is not needs judging. At K = 65535 most slots of most rows are padding.
        if (!value_agrees(v, padding_value, facts_.tolerance)) f(slot, t, v, padding_value);
      } else if (t < vocab && is_candidate(x[t])) {
        const auto it = ref_by_logit_.find(x[t]);
        if (it != ref_by_logit_.end()) f(slot, t, v, it->second);
        // else: the token is not among the K largest, already a token violation
      }
    }
  }

  void judge_values(const ResultData& reference, const ResultData& got) {
    // Why a row passed by its least tolerance needs no calibration: the calibrated tolerance is
    // larger (sum_err = max(sigma * dev, floor * 2^-24) >= its value at dev = 0), so a value that
    // agrees under the least agrees under it, and its share of it is no more than its share of
    // the least. A row is calibrated only where a value fails under the least tolerance or uses
    // more of it than the largest share this verdict has seen, so the verdict, its figures and
    // the row they name are those of calibrating every row. On a passing batch most rows are not
    // calibrated once the first few have set the figure.
    index_reference_values(reference);
    if (facts_.calibration_pending) {
      const ErrorStats& stats = verdict_.stats;
      bool matters = !stats.max_tolerance_row;
      for_each_value(reference, got, [&](std::uint64_t, std::uint32_t, float v, float want) {
        matters |= !value_agrees(v, want, facts_.tolerance) ||
                   share_used(v, want, facts_.tolerance) > stats.max_tolerance_used;
      });
      if (matters) facts_.calibrated(tolerance_);
    }
    for_each_value(reference, got,
                   [&](std::uint64_t slot, std::uint32_t t, float v, float want) { judge_value(slot, t, v, want); });
  }

  void judge_value(std::uint64_t slot, std::uint32_t t, float got, float want) {
    const RowTolerance& row = facts_.tolerance;
    const bool agrees = value_agrees(got, want, row);
    if (std::isnan(want) || std::isinf(want) || std::isnan(got) || std::isinf(got)) {
      if (!agrees)
        fail(Rule::value, slot, t,
             [&] { return fmt::format("token {} got {} want {} (NaN and infinities must match exactly)", t, got, want); });
      return;
    }
    const double error = std::fabs(double(got) - double(want));
    ErrorStats& stats = verdict_.stats;
    ++stats.values;
    stats.max_abs_error = std::max(stats.max_abs_error, error);
    if (std::fabs(want) >= kUlpStatsFloor) stats.max_ulp_error = std::max(stats.max_ulp_error, error / ulp_f32(want));
    const double used = share_used(got, want, row);
    if (used > stats.max_tolerance_used || !stats.max_tolerance_row) {
      stats.max_tolerance_used = std::max(stats.max_tolerance_used, used);
      if (!shape_) shape_ = row_shape(facts_.x);  // once per row, and only for a row that sets the figure
      stats.max_tolerance_row = RowLocation{b_, o_, *shape_, row};
    }
    if (!agrees)
      fail(Rule::value, slot, t,
           [&] { return fmt::format("token {} got {} want {} (value off by {:.3g} > {:.3g}; sum_err {:.3g} by the {} rule{})", t,
                       got, want, error, row.allowed(want), row.sum_err, sum_rule_name(row.sum_rule),
                       row.sum_rule == SumRule::calibrated ? fmt::format(", dev {:.3g}", row.dev) : ""); });
  }

  const RaggedBatch& batch_;
  const std::uint32_t k_;
  const std::uint64_t width_;
  const Tolerance& tolerance_;
  Verdict& verdict_;
  const std::uint64_t keep_;
  std::uint64_t b_ = 0;
  std::uint64_t o_ = 0;
  RowFacts facts_;
  // Kept from row to row to reuse their memory: judge_tokens' and for_each_value's.
  std::vector<std::uint64_t> seen_;
  std::vector<std::pair<float, std::uint64_t>> reported_;
  std::unordered_map<float, float> ref_by_logit_;
  std::optional<RowShape> shape_;  // of the row being judged, once needed
};

bool has_shape(const ResultData& r, std::uint64_t rows, std::uint64_t width) {
  return r.rows == rows && r.width == width && r.lp_logits.size() == rows * width &&
         r.lp_tokens.size() == rows * width && (!r.ranks || r.lp_ranks.size() == rows);
}

}  // namespace

const char* rule_name(Rule rule) {
  switch (rule) {
    case Rule::shape: return "shape";
    case Rule::last_token: return "last_token";
    case Rule::token_range: return "token_range";
    case Rule::duplicate_token: return "duplicate_token";
    case Rule::not_candidate: return "not_candidate";
    case Rule::not_top: return "not_top";
    case Rule::padding_count: return "padding_count";
    case Rule::value: return "value";
    case Rule::rank:
      return "rank";
    case Rule::greedy_exact:
      return "greedy_exact";
  }
  return "unknown";
}

std::optional<Rule> rule_from_name(std::string_view name) {
  for (std::size_t r = 0; r < kRuleCount; ++r)
    if (name == rule_name(static_cast<Rule>(r))) return static_cast<Rule>(r);
  return std::nullopt;
}

std::string Violation::message() const {
  if (rule == Rule::shape) return what;
  return fmt::format("batch {}, output row {}, slot {}: {}", batch, output_row, slot, what);
}

void ErrorStats::merge(const ErrorStats& other) {
  rows += other.rows;
  values += other.values;
  max_abs_error = std::max(max_abs_error, other.max_abs_error);
  max_ulp_error = std::max(max_ulp_error, other.max_ulp_error);
  if (other.max_tolerance_row && (!max_tolerance_row || other.max_tolerance_used > max_tolerance_used))
    max_tolerance_row = other.max_tolerance_row;
  max_tolerance_used = std::max(max_tolerance_used, other.max_tolerance_used);
}

double ulp_f32(float value) {
  const float a = std::fabs(value);
  if (a == std::numeric_limits<float>::max()) return double(a) - double(std::nextafter(a, 0.0f));
  return double(std::nextafter(a, kInf)) - double(a);
}

double RowTolerance::allowed(double ref) const {
  return ulps * ulp_f32(static_cast<float>(ref)) + normalizer_term + sum_err;
}

RowTolerance row_tolerance(std::span<const float> x, const Tolerance& tolerance) {
  const bool any_finite = std::any_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
  const bool nan_or_inf = std::any_of(x.begin(), x.end(), [](float v) { return std::isnan(v) || v == kInf; });
  return tolerance_of_row(x, largest_finite_logit(x), nan_or_inf || !any_finite, tolerance);
}

double share_used(float got, float want, const RowTolerance& row) {
  if (!std::isfinite(got) || !std::isfinite(want)) return 0;  // must match exactly: no share
  const double error = std::fabs(double(got) - double(want));
  return error == 0 ? 0.0 : error / row.allowed(want);  // infinite where nothing is allowed
}

bool value_agrees(float got, float want, const RowTolerance& row) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(double(got) - double(want)) <= row.allowed(want);
}

const char* RowShape::kind() const {
  if (top_probability >= 0.5) return "confident";
  if (masked > 0) return "masked";
  if (finite_range <= 1) return "flat";
  return "spread";
}

RowShape row_shape(std::span<const float> x) {
  RowShape shape;
  shape.vocab = x.size();
  const double m = largest_finite_logit(x);
  double smallest = std::numeric_limits<double>::infinity(), sum = 0;
  for (const float v : x) {
    if (v == -kInf) ++shape.masked;
    if (!std::isfinite(v)) continue;
    smallest = std::min(smallest, double(v));
    sum += std::exp(double(v) - m);
  }
  if (sum > 0) {
    shape.top_probability = 1 / sum;
    shape.finite_range = m - smallest;
  }
  return shape;
}

const char* sum_rule_name(SumRule rule) {
  switch (rule) {
    case SumRule::calibrated:
      return "calibrated";
    case SumRule::linear:
      return "linear";
    case SumRule::sqrt:
      return "sqrt";
  }
  return "unknown";
}

std::optional<SumRule> sum_rule_from_name(std::string_view name) {
  for (const SumRule rule : {SumRule::calibrated, SumRule::linear, SumRule::sqrt})
    if (name == sum_rule_name(rule)) return rule;
  return std::nullopt;
}

double largest_finite_logit(std::span<const float> x) {
  // Sixteen running maxima, of the entries j = l mod 16, so the loop vectorizes (a maximum is
  // exact: its order changes nothing).
  constexpr std::size_t kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -kInf);
  const auto take = [](float& lane, float v) { lane = std::fabs(v) <= std::numeric_limits<float>::max() && v > lane ? v : lane; };
  const std::size_t whole = x.size() / kLanes * kLanes;
  for (std::size_t base = 0; base < whole; base += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) take(lanes[l], x[base + l]);
  for (std::size_t j = whole; j < x.size(); ++j) take(lanes[0], x[j]);
  const float m = *std::max_element(lanes, lanes + kLanes);
  return m == -kInf ? 0.0 : double(m);
}

std::uint32_t rank_of(std::span<const float> x, std::uint32_t s) {
  const float xs = x[s];
  return static_cast<std::uint32_t>(std::count_if(x.begin(), x.end(), [xs](float v) { return v >= xs; }));
}

Verdict compare_result(const RaggedBatch& batch, std::uint32_t k, const ResultData& reference, const ResultData& got,
                       const Tolerance& tolerance, const KeptViolations& kept) {
  const OutputShape shape = validate_batch(batch, k);
  if (!has_shape(reference, shape.rows, shape.width))
    throw std::invalid_argument(fmt::format("compare_result: reference result is [{}, {}], want [{}, {}]",
                                            reference.rows, reference.width, shape.rows, shape.width));
  if (kept.budget != nullptr)
    kept.budget->charge(verdict_bytes(shape.rows, shape.width, kept.max_kept),
                        fmt::format("the verdict ({} violations kept at most, and every failed row)", kept.max_kept));
  Verdict verdict;
  if (!has_shape(got, shape.rows, shape.width)) {
    verdict.violation_count = 1;
    verdict.rule_counts[static_cast<std::size_t>(Rule::shape)] = 1;
    if (kept.max_kept > 0)
      verdict.violations.push_back(
          {Rule::shape, 0, 0, 0, 0,
           fmt::format("result shape got [{}, {}] with {} values, {} tokens{} want [{}, {}] (N = "
                       "lp_output_offsets[B], W = K + 1){}",
                       got.rows, got.width, got.lp_logits.size(), got.lp_tokens.size(),
                       got.ranks ? fmt::format(" and {} ranks", got.lp_ranks.size()) : "", shape.rows, shape.width,
                       got.ranks ? ", ranks [N]" : ""),
           RowTolerance{}});
    return verdict;
  }
  // A batch worth sharing (as the reference's: reference/row_backend.cpp) is judged on every core,
  // in blocks of rows taken in turn, each with a verdict of its own; the blocks' verdicts then
  // merge in row order, so the violations, their order and the figures are one thread's.
  const std::vector<RowTask> tasks = plan_rows(batch);
  const bool shared = tasks.size() > 1 && tasks.size() * batch.vocab >= kSharedEntries;
  const std::size_t blocks = shared ? std::min<std::size_t>(tasks.size(), 8 * std::size_t(openmp_max_threads())) : 1;
  const auto rows_of = [&](std::size_t p) {
    return std::pair(tasks.size() * p / blocks, tasks.size() * (p + 1) / blocks);
  };
  // Each block keeps its share of the limit (the shares sum to it), so the blocks together never
  // hold more than the verdict will.
  const auto share = [&](std::size_t p) { return kept.max_kept / blocks + (p < kept.max_kept % blocks ? 1 : 0); };
  std::vector<Verdict> parts(blocks);
#pragma omp parallel for schedule(dynamic, 1) if (shared)
  for (std::size_t p = 0; p < blocks; ++p) {
    RowJudge judge(batch, k, tolerance, parts[p], share(p));
    for (auto [i, end] = rows_of(p); i < end; ++i) judge.judge(tasks[i], reference, got);
  }
  // The first max_kept in row order take from block p what the blocks before it left room for.
  // A block that found more than its share but kept less than that is judged again keeping
  // just that many (only when violations are dropped, and only up to the block holding the
  // last one kept); the counts and figures are the first pass's.
  std::vector<std::uint64_t> wanted(blocks);
  std::vector<std::size_t> again;
  std::uint64_t room = kept.max_kept;
  for (std::size_t p = 0; p < blocks; ++p) {
    wanted[p] = std::min(parts[p].violation_count, room);
    room -= wanted[p];
    if (wanted[p] > parts[p].violations.size()) {
      again.push_back(p);
      std::vector<Violation>().swap(parts[p].violations);
    } else {
      parts[p].violations.resize(wanted[p]);
    }
  }
#pragma omp parallel for schedule(dynamic, 1) if (again.size() > 1)
  for (std::size_t a = 0; a < again.size(); ++a) {
    const std::size_t p = again[a];
    Verdict scratch;
    scratch.violations.reserve(wanted[p]);
    RowJudge judge(batch, k, tolerance, scratch, wanted[p]);
    for (auto [i, end] = rows_of(p); i < end && scratch.violations.size() < wanted[p]; ++i)
      judge.judge(tasks[i], reference, got);
    parts[p].violations = std::move(scratch.violations);
  }
  std::uint64_t kept_in_all = 0, failed_in_all = 0;
  for (const Verdict& part : parts) kept_in_all += part.violations.size(), failed_in_all += part.failed_rows.size();
  verdict.violations.reserve(kept_in_all);
  verdict.failed_rows.reserve(failed_in_all);
  for (Verdict& part : parts) {
    verdict.violations.insert(verdict.violations.end(), std::make_move_iterator(part.violations.begin()),
                              std::make_move_iterator(part.violations.end()));
    verdict.failed_rows.insert(verdict.failed_rows.end(), part.failed_rows.begin(), part.failed_rows.end());
    std::vector<Violation>().swap(part.violations);
    std::vector<FailedRow>().swap(part.failed_rows);
    verdict.violation_count += part.violation_count;
    for (std::size_t r = 0; r < kRuleCount; ++r) verdict.rule_counts[r] += part.rule_counts[r];
    verdict.stats.merge(part.stats);
  }
  return verdict;
}

std::uint64_t verdict_bytes(std::uint64_t rows, std::uint64_t width, std::uint64_t max_kept) {
  // rows and width come from a validated batch (rows * width < 2^52), so nothing here overflows.
  const std::uint64_t possible = rows * (3 * width + 2);
  const std::uint64_t kept = std::min(max_kept, possible);
  const std::uint64_t failed_rows = 3 * rows * sizeof(FailedRow) + rows * sizeof(RowTask);  // and the row plan
  if (kept > (UINT64_MAX - failed_rows) / kKeptViolationBytes) return UINT64_MAX;  // a limit no budget holds
  return kept * kKeptViolationBytes + failed_rows;
}

}  // namespace logprobs
