#include "spec5_check.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <set>
#include <sstream>

namespace logprobs::fuzz {
namespace {

constexpr double kAtol = 1e-5;
constexpr double kUlps = 4;

bool is_candidate(float x) { return x > -std::numeric_limits<float>::infinity(); }  // false for NaN

double ulp_of(float value) {
  const float magnitude = std::fabs(value);
  return double{std::nextafter(magnitude, std::numeric_limits<float>::infinity())} - magnitude;
}

// Whether got matches want: NaN only NaN, an infinity only the same one, else within tolerance.
bool value_matches(float got, float want, double max_logit) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  const double bound = kAtol * std::max(1.0, std::fabs(max_logit)) + kUlps * ulp_of(want);
  return std::fabs(double{got} - double{want}) <= bound;
}

std::string value_mismatch(float got, float want, double max_logit) {
  std::ostringstream why;
  why << "got " << got << " want " << want;
  if (std::isfinite(got) && std::isfinite(want))
    why << " (off by " << std::fabs(double{got} - double{want}) << " > "
        << kAtol * std::max(1.0, std::fabs(max_logit)) + kUlps * ulp_of(want) << ")";
  return why.str();
}

class RowJudge {
 public:
  RowJudge(const BatchData& batch, int levels, const ResultData& reference, const ResultData& got, const RowTask& task,
           std::vector<std::string>& violations)
      : x_(batch.view().logit_row(task.logit_row)),
        vocab_(static_cast<std::uint32_t>(batch.vocab)),
        k_(top_k(levels)),
        reference_(reference),
        got_(got),
        task_(task),
        violations_(violations) {
    max_logit_ = -std::numeric_limits<double>::infinity();
    for (float v : x_) {
      if (!std::isnan(v)) max_logit_ = std::max(max_logit_, double{v});
    }
  }

  void judge() {
    judge_top_tokens();
    judge_values();
  }

 private:
  void fail(std::uint64_t slot, const std::string& what) {
    std::ostringstream line;
    line << "output row " << task_.output_row << " (logit row " << task_.logit_row << "), slot " << slot << ": " << what;
    violations_.push_back(line.str());
  }

  // The non-padding top tokens are distinct, below V, and their logits are, as a multiset, the
  // K largest candidates' logits; the padding count is exact; the last slot holds s.
  void judge_top_tokens() {
    std::vector<float> largest;
    for (float v : x_) {
      if (is_candidate(v)) largest.push_back(v);
    }
    std::sort(largest.begin(), largest.end(), std::greater<>());
    largest.resize(std::min<std::size_t>(largest.size(), k_));

    std::set<std::uint32_t> seen;
    std::vector<float> reported;
    for (std::uint32_t slot = 0; slot < k_; ++slot) {
      const std::uint32_t t = got_.token(task_.output_row, slot);
      if (t == vocab_) continue;
      if (t > vocab_) return fail(slot, "token " + std::to_string(t) + " is past V " + std::to_string(vocab_));
      if (!seen.insert(t).second) return fail(slot, "token " + std::to_string(t) + " appears twice");
      reported.push_back(x_[t]);
    }
    std::sort(reported.begin(), reported.end(), std::greater<>());
    if (reported.size() != largest.size()) {
      fail(k_, std::to_string(k_ - reported.size()) + " padding slots, want " + std::to_string(k_ - largest.size()));
    } else if (!std::equal(reported.begin(), reported.end(), largest.begin())) {  // NaN never equals
      fail(k_, "the top tokens' logits are not the K largest candidates'");
    }
    const std::uint32_t last = got_.token(task_.output_row, k_);
    if (last != task_.token) fail(k_, "last-slot token " + std::to_string(last) + ", want " + std::to_string(task_.token));
  }

  // The reference's value for a slot of `got` holding token t: the value of the reference slot
  // whose token has the same logit (any tie gives the same value), or of a padding slot.
  const float* reference_value(std::uint32_t t) const {
    if (t == vocab_) return reference_padding_;
    const auto it = std::lower_bound(reference_by_logit_.begin(), reference_by_logit_.end(), x_[t],
                                     [](const auto& entry, float logit) { return entry.first < logit; });
    return it != reference_by_logit_.end() && it->first == x_[t] ? &it->second : nullptr;
  }

  void index_reference() {
    for (std::uint32_t slot = 0; slot < k_; ++slot) {
      const std::uint32_t r = reference_.token(task_.output_row, slot);
      const float value = reference_.value(task_.output_row, slot);
      if (r == vocab_ && reference_padding_ == nullptr) {
        reference_padding_ = &reference_.lp_logits[task_.output_row * reference_.width + slot];
      } else if (r < vocab_ && !std::isnan(x_[r])) {
        reference_by_logit_.emplace_back(x_[r], value);
      }
    }
    std::sort(reference_by_logit_.begin(), reference_by_logit_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }

  void judge_values() {
    index_reference();
    for (std::uint32_t slot = 0; slot < k_; ++slot) {
      const std::uint32_t t = got_.token(task_.output_row, slot);
      if (t > vocab_) continue;  // already a token violation
      const float* want = reference_value(t);
      if (want == nullptr) continue;  // a token the reference lacks: a token violation already
      const float value = got_.value(task_.output_row, slot);
      if (!value_matches(value, *want, max_logit_))
        fail(slot, "token " + std::to_string(t) + ": " + value_mismatch(value, *want, max_logit_));
    }
    const float value = got_.value(task_.output_row, k_);
    const float want = reference_.value(task_.output_row, k_);
    if (!value_matches(value, want, max_logit_))
      fail(k_, "last slot, token " + std::to_string(task_.token) + ": " + value_mismatch(value, want, max_logit_));
  }

  std::span<const float> x_;
  std::uint32_t vocab_;
  std::uint32_t k_;
  const ResultData& reference_;
  const ResultData& got_;
  const RowTask& task_;
  std::vector<std::string>& violations_;
  double max_logit_;
  std::vector<std::pair<float, float>> reference_by_logit_;  // (logit, value) of its top slots
  const float* reference_padding_ = nullptr;
};

}  // namespace

std::vector<std::string> spec5_violations(const BatchData& batch, int levels, const ResultData& reference,
                                          const ResultData& got) {
  const OutputShape shape = validate_batch(batch.view(), levels);
  if (got.rows != shape.rows || got.width != shape.width || reference.rows != shape.rows ||
      reference.width != shape.width)
    return {"result shape differs from [N, W]"};
  std::vector<std::string> violations;
  for (const RowTask& task : plan_rows(batch.view())) RowJudge(batch, levels, reference, got, task, violations).judge();
  return violations;
}

}  // namespace logprobs::fuzz
