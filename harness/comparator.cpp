// SPEC §5, row by row: first the tokens (judged through the input logits, so any tie-breaking
// and any slot order pass), then the values (against the reference, within tolerance).
#include "comparator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// What the input says about one logit row, independent of any backend.
struct RowFacts {
  double scale_max = 0;             // the largest finite logit (0 if none), for the atol scale
  bool normalizer_is_nan = false;   // SPEC §3: NaN or +inf present, or only -inf
  std::vector<float> top_logits;    // the K largest candidate logits, descending
};

bool is_candidate(float x) { return x > -kInf; }  // false for NaN and -inf

RowFacts row_facts(std::span<const float> x, std::uint32_t k) {
  RowFacts facts;
  bool any_finite = false;
  std::vector<float> candidates;
  for (const float v : x) {
    if (std::isnan(v) || v == kInf) facts.normalizer_is_nan = true;
    any_finite |= std::isfinite(v);
    if (k > 0 && is_candidate(v)) candidates.push_back(v);
  }
  if (!any_finite) facts.normalizer_is_nan = true;  // only -inf (or NaN and +inf)
  facts.scale_max = largest_finite_logit(x);
  const std::size_t kept = std::min<std::size_t>(k, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + kept, candidates.end(), std::greater<>());
  candidates.resize(kept);
  facts.top_logits = std::move(candidates);
  return facts;
}

class RowJudge {
 public:
  RowJudge(const RaggedBatch& batch, int levels, const Tolerance& tolerance, Verdict& verdict)
      : batch_(batch), k_(top_k(levels)), width_(slots_per_row(levels)), tolerance_(tolerance), verdict_(verdict) {}

  void judge(std::uint64_t b, const RowTask& task, const ResultData& reference, const ResultData& got) {
    b_ = b;
    o_ = task.output_row;
    x_ = batch_.logit_row(task.logit_row);
    facts_ = row_facts(x_, k_);
    ++verdict_.stats.rows;
    judge_tokens(task.token, got);
    judge_values(reference, got);
  }

 private:
  void fail(Rule rule, std::uint64_t slot, std::uint32_t token, std::string what) {
    verdict_.violations.push_back({rule, b_, o_, slot, token, std::move(what)});
  }

  void judge_tokens(std::uint32_t s, const ResultData& got) {
    const auto vocab = static_cast<std::uint32_t>(batch_.vocab);
    if (got.token(o_, k_) != s)
      fail(Rule::last_token, k_, got.token(o_, k_), fmt::format("last slot token got {} want {} (the evaluated token)",
                                                               got.token(o_, k_), s));
    std::unordered_set<std::uint32_t> seen;
    std::vector<std::pair<float, std::uint64_t>> reported;  // (logit, slot) of each valid top token
    std::uint64_t padding = 0;
    for (std::uint64_t slot = 0; slot < k_; ++slot) {
      const std::uint32_t t = got.token(o_, slot);
      if (t == vocab) {
        ++padding;
      } else if (t > vocab) {
        fail(Rule::token_range, slot, t, fmt::format("token got {} want a token below V = {} or padding {}", t, vocab, vocab));
      } else if (!seen.insert(t).second) {
        fail(Rule::duplicate_token, slot, t, fmt::format("token got {} want distinct top tokens ({} appears twice)", t, t));
      } else if (!is_candidate(x_[t])) {
        fail(Rule::not_candidate, slot, t, fmt::format("token got {} with logit {} want a candidate (logit not NaN, > -inf)", t, x_[t]));
      } else {
        reported.emplace_back(x_[t], slot);
      }
    }
    const std::uint64_t want_padding = k_ - facts_.top_logits.size();
    if (padding != want_padding)
      fail(Rule::padding_count, k_ == 0 ? 0 : k_ - 1, vocab,
           fmt::format("padding count got {} want {} ({} candidates for K = {})", padding, want_padding,
                       facts_.top_logits.size(), k_));
    // Multiset of reported logits against the K largest: compare both sorted descending; the
    // first place where they differ names the slot that holds a logit too small.
    std::sort(reported.begin(), reported.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; i < reported.size() && i < facts_.top_logits.size(); ++i) {
      const auto [logit, slot] = reported[i];
      if (logit != facts_.top_logits[i]) {
        fail(Rule::not_top, slot, got.token(o_, slot),
             fmt::format("top token got {} with logit {} want a token with logit {} (the K largest candidate logits "
                         "are not all reported)",
                         got.token(o_, slot), logit, facts_.top_logits[i]));
        break;
      }
    }
  }

  void judge_values(const ResultData& reference, const ResultData& got) {
    const auto vocab = static_cast<std::uint32_t>(batch_.vocab);
    // Equal logits have equal reference values (x + n, rounded once), so a token tied with one
    // the reference reported, but not reported by it, is judged by that equal logit's value.
    std::unordered_map<float, float> ref_by_logit;
    for (std::uint64_t slot = 0; slot < width_; ++slot) {
      const std::uint32_t t = reference.token(o_, slot);
      if (t < vocab && !std::isnan(x_[t])) ref_by_logit.emplace(x_[t], reference.value(o_, slot));
    }
    const float padding_value = facts_.normalizer_is_nan ? std::numeric_limits<float>::quiet_NaN() : -kInf;
    for (std::uint64_t slot = 0; slot < width_; ++slot) {
      const std::uint32_t t = got.token(o_, slot);
      const float v = got.value(o_, slot);
      if (slot == k_) {
        if (t == reference.token(o_, k_)) judge_value(slot, t, v, reference.value(o_, k_));
      } else if (t == vocab) {
        judge_value(slot, t, v, padding_value);
      } else if (t < vocab && is_candidate(x_[t])) {
        const auto it = ref_by_logit.find(x_[t]);
        if (it != ref_by_logit.end()) judge_value(slot, t, v, it->second);
        // else: the token is not among the K largest, already a token violation
      }
    }
  }

  void judge_value(std::uint64_t slot, std::uint32_t t, float got, float want) {
    const bool agrees = value_agrees(got, want, facts_.scale_max, batch_.vocab, tolerance_);
    if (std::isnan(want) || std::isinf(want) || std::isnan(got) || std::isinf(got)) {
      if (!agrees)
        fail(Rule::value, slot, t,
             fmt::format("token {} got {} want {} (NaN and infinities must match exactly)", t, got, want));
      return;
    }
    const double error = std::fabs(double(got) - double(want));
    const double allowed = allowed_error(want, facts_.scale_max, batch_.vocab, tolerance_);
    ErrorStats& stats = verdict_.stats;
    ++stats.values;
    stats.max_abs_error = std::max(stats.max_abs_error, error);
    stats.max_ulp_error = std::max(stats.max_ulp_error, error / ulp_f32(want));
    stats.max_tolerance_used = std::max(stats.max_tolerance_used, error / allowed);
    if (!agrees)
      fail(Rule::value, slot, t,
           fmt::format("token {} got {} want {} (value off by {:.3g} > {:.3g})", t, got, want, error, allowed));
  }

  const RaggedBatch& batch_;
  const std::uint32_t k_;
  const std::uint64_t width_;
  const Tolerance& tolerance_;
  Verdict& verdict_;
  std::uint64_t b_ = 0;
  std::uint64_t o_ = 0;
  std::span<const float> x_;
  RowFacts facts_;
};

bool has_shape(const ResultData& r, std::uint64_t rows, std::uint64_t width) {
  return r.rows == rows && r.width == width && r.lp_logits.size() == rows * width && r.lp_tokens.size() == rows * width;
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
  }
  return "unknown";
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
  max_tolerance_used = std::max(max_tolerance_used, other.max_tolerance_used);
}

double ulp_f32(float value) {
  const float a = std::fabs(value);
  if (a == std::numeric_limits<float>::max()) return double(a) - double(std::nextafter(a, 0.0f));
  return double(std::nextafter(a, kInf)) - double(a);
}

double allowed_error(double ref, double row_max, std::uint64_t vocab, const Tolerance& tolerance) {
  return tolerance.atol * std::max(1.0, std::fabs(row_max)) + tolerance.ulps * ulp_f32(static_cast<float>(ref)) +
         tolerance.summation * std::ldexp(double(vocab), -24);
}

bool value_agrees(float got, float want, double row_max, std::uint64_t vocab, const Tolerance& tolerance) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(double(got) - double(want)) <= allowed_error(want, row_max, vocab, tolerance);
}

double largest_finite_logit(std::span<const float> x) {
  double m = -std::numeric_limits<double>::infinity();
  for (const float v : x)
    if (std::isfinite(v)) m = std::max(m, double(v));
  return std::isfinite(m) ? m : 0.0;
}

Verdict compare_result(const RaggedBatch& batch, int levels, const ResultData& reference, const ResultData& got,
                       const Tolerance& tolerance) {
  const OutputShape shape = validate_batch(batch, levels);
  if (!has_shape(reference, shape.rows, shape.width))
    throw std::invalid_argument(fmt::format("compare_result: reference result is [{}, {}], want [{}, {}]",
                                            reference.rows, reference.width, shape.rows, shape.width));
  Verdict verdict;
  if (!has_shape(got, shape.rows, shape.width)) {
    verdict.violations.push_back(
        {Rule::shape, 0, 0, 0, 0,
         fmt::format("result shape got [{}, {}] with {} values and {} tokens want [{}, {}] (N = lp_output_offsets[B], "
                     "W = 2^levels)",
                     got.rows, got.width, got.lp_logits.size(), got.lp_tokens.size(), shape.rows, shape.width)});
    return verdict;
  }
  RowJudge judge(batch, levels, tolerance, verdict);
  const auto loo = batch.lp_output_offsets;
  std::uint64_t b = 0;
  for (const RowTask& task : plan_rows(batch)) {
    while (loo[b + 1] <= task.output_row) ++b;
    judge.judge(b, task, reference, got);
  }
  return verdict;
}

}  // namespace logprobs
