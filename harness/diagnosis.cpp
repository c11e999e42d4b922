// The diagnosis (diagnosis.hpp), in two passes over the failing rows.
//
// Over 400 lines: the fourteen fingerprints belong together, since which class claims a row is
// decided by their order (the specific ones before normalizer_shift, which fits any row whose
// values move together), and that order reads in one place, claim_rows.
//
// Pass 1 reads each failing row once (its x, its exact normalizer, its tolerance) and records what
// each class would explain on it: an Observation per class, with the figures its evidence needs.
// Pass 2 holds no row: it settles what needs every row at once (one clamping constant, one 16-bit
// format, one shift or one mass or one N for the normalizer classes), then gives each row to the
// classes in order, each taking the rules it explains that no earlier class took.
#include "diagnosis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "half_precision.hpp"

namespace logprobs {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using RuleMask = std::uint32_t;
constexpr RuleMask bit(Rule rule) { return 1u << static_cast<unsigned>(rule); }
constexpr RuleMask kTopTokenRules = bit(Rule::token_range) | bit(Rule::duplicate_token) | bit(Rule::not_candidate) |
                                    bit(Rule::not_top) | bit(Rule::padding_count);
constexpr RuleMask kEveryRule = ~RuleMask{0};

// How many logit rows rows_permuted compares an output row with: all of them in a batch of up to
// this many, else this many around the row's own (an offset bug moves rows by a few).
constexpr std::uint64_t kPermutationCandidates = 256;
// How many rows that passed the normalizer classes read as witnesses beside the failing ones.
constexpr std::size_t kWitnesses = 8;

// SPEC §2.6 in double precision, as the reference computes it: m, log S and n = -(m + log S),
// NaN (nan_row) for SPEC §3's rows.
struct Normalizer {
  double m = 0;
  double log_sum = kNaN;
  double n = kNaN;
  bool nan_row = true;
};

Normalizer normalizer_of(std::span<const float> x) {
  Normalizer norm;
  double m = -kInf;
  for (const float v : x) {
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) return norm;
    if (std::isfinite(v)) m = std::max(m, double(v));
  }
  if (m == -kInf) return norm;  // only -inf
  double sum = 0;
  for (const float v : x) sum += std::exp(double(v) - m);
  norm.m = m;
  norm.log_sum = std::log(sum);
  norm.n = -(m + norm.log_sum);
  norm.nan_row = false;
  return norm;
}

// x_j + n with IEEE semantics (NaN on a SPEC §3 row, -inf for x_j = -inf).
double exact_value(float xj, const Normalizer& norm) { return norm.nan_row ? kNaN : double(xj) + norm.n; }

bool is_candidate(float v) { return v > -std::numeric_limits<float>::infinity(); }

// One reported slot against the exact value of the token it reports.
struct SlotValue {
  std::uint64_t slot = 0;
  std::uint32_t token = 0;
  float got = 0;
  double want = kNaN;  // x_t + n, or padding's -inf + n
  bool valid = false;  // a token below V, or padding V in a top slot
  bool wrong = false;  // outside the row's tolerance of `want`
};

// What one class would explain on one row: the rules it covers and the figures of its evidence
// (their meaning is the class's: see evidence_of).
struct Observation {
  RuleMask covers = 0;
  std::array<double, 4> figure{};
  std::int64_t key = 0;  // a discrete figure that must be one value over the rows (a constant, a format)
  std::string example;
};

// The normalizer classes' view of a row whose values all move by one amount d.
struct Shift {
  double d = 0;          // got - exact, the same for every value of the row
  double u = 0;          // how far the bug's own offset may be from d: rounding and honest drift
  double log_total = 0;  // log of sum_j exp(x_j) = m + log S
  std::uint64_t masked = 0;
  // Too high (d > 0): the N with S e^-d = the sum of the row's N largest e_j, and the V' with it
  // the sum of its first V' entries, when there are such.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> top_n, prefix;
};

struct RowObservations {
  std::uint64_t output_row = 0;
  RuleMask rules = 0;
  std::array<std::optional<Observation>, kBugClassCount> seen;
  std::optional<Shift> shift;
};

// The Ns (1-based counts) whose prefix sum of `sums` (ascending) lies in [lo, hi], excluding the
// whole row; nothing when none does.
std::optional<std::pair<std::uint64_t, std::uint64_t>> counts_within(const std::vector<double>& sums, double lo,
                                                                     double hi) {
  const auto first = std::lower_bound(sums.begin(), sums.end() - 1, lo);
  const auto last = std::upper_bound(sums.begin(), sums.end() - 1, hi);
  if (first >= last) return std::nullopt;
  return std::pair<std::uint64_t, std::uint64_t>(first - sums.begin() + 1, last - sums.begin());
}

// The spacing of a 16-bit format's values at |v| (bf16: 8 significant bits, subnormal below
// 2^-126; f16: 11, subnormal below 2^-14). ilogb(0) is INT_MIN: the floors keep it from overflowing.
double ulp_16(LogitsDtype format, double v) {
  const int exponent = std::ilogb(std::fabs(v));
  return format == LogitsDtype::bf16 ? std::ldexp(1.0, std::max(exponent, -126) - 7)
                                     : std::ldexp(1.0, std::max(exponent, -14) - 10);
}

class RowReader {
 public:
  RowReader(const RaggedBatch& batch, std::uint32_t k, const ResultData& got, const Tolerance& tolerance)
      : batch_(batch), k_(k), got_(got), tolerance_(tolerance), tasks_(plan_rows(batch)) {
    raw_ = batch;
    raw_.temperatures.reset();
  }

  RowObservations observe(const FailedRow& failed) {
    RowObservations row;
    row.output_row = failed.output_row;
    row.rules = failed.rules;
    task_ = tasks_[failed.output_row];
    x_.resize(batch_.vocab);
    read_row(batch_, task_, x_);
    norm_ = normalizer_of(x_);
    tol_ = row_tolerance(x_, tolerance_);
    read_slots();
    // The K largest candidates by a partial sort (a whole sort of the row, sorted_candidates(),
    // only where a fingerprint needs it: 5 ms a row at V = 128256).
    sorted_ = false;
    top_.clear();
    if (k_ > 0) {
      for (const float v : x_)
        if (is_candidate(v)) top_.push_back(v);
      const std::size_t kept = std::min<std::size_t>(k_, top_.size());
      std::partial_sort(top_.begin(), top_.begin() + std::ptrdiff_t(kept), top_.end(), std::greater<>());
      top_.resize(kept);
    }

    auto& seen = row.seen;
    const auto at = [&](BugClass bug) -> std::optional<Observation>& { return seen[static_cast<int>(bug)]; };
    at(BugClass::nan_not_propagated) = nan_not_propagated(row.rules);
    at(BugClass::evaluated_token_misaligned) = misaligned(row.rules);
    at(BugClass::neg_inf_clamped) = clamped(row.rules);
    at(BugClass::values_rounded_bf16) = rounded(row.rules, LogitsDtype::bf16);
    at(BugClass::values_rounded_f16) = rounded(row.rules, LogitsDtype::f16);
    at(BugClass::tokens_off_by_one) = off_by_one(row.rules);
    at(BugClass::padding_count_wrong) = padding_wrong(row.rules);
    at(BugClass::topk_not_exact) = topk_not_exact(row.rules);
    at(BugClass::rank_strict) = rank_strict(row.rules);
    row.shift = shift(row.rules);
    // The costlier fingerprints only for a row that the others leave unexplained (a shift alone
    // does not count: it fits a row of one value whatever its bug).
    RuleMask covered = 0;
    for (const auto& o : seen)
      if (o) covered |= o->covers;
    if ((row.rules & ~covered) == 0) return row;
    if (row.rules & bit(Rule::value) & ~covered) {
      at(BugClass::temperature_not_applied) = temperature(row.rules, false);
      at(BugClass::temperature_inverted) = temperature(row.rules, true);
    }
    if (!at(BugClass::temperature_not_applied) && !at(BugClass::temperature_inverted))
      at(BugClass::rows_permuted) = permuted(row.rules);
    return row;
  }

 private:
  void read_slots() {
    const std::uint64_t width = slots_per_row(k_);
    const auto vocab = static_cast<std::uint32_t>(batch_.vocab);
    slots_.clear();
    for (std::uint64_t slot = 0; slot < width; ++slot) {
      SlotValue s{slot, got_.token(task_.output_row, slot), got_.value(task_.output_row, slot)};
      if (s.token < vocab) {
        s.valid = true;
        s.want = exact_value(x_[s.token], norm_);
      } else if (s.token == vocab && slot < k_) {
        s.valid = true;
        s.want = norm_.nan_row ? kNaN : -kInf;
      }
      s.wrong = s.valid && !value_agrees(s.got, static_cast<float>(s.want), tol_);
      slots_.push_back(s);
    }
  }

  const SlotValue& last() const { return slots_.back(); }
  std::uint32_t vocab() const { return static_cast<std::uint32_t>(batch_.vocab); }
  bool only_last_wrong() const {
    return std::none_of(slots_.begin(), slots_.end() - 1, [](const SlotValue& s) { return s.wrong; });
  }
  std::string row_label() const { return fmt::format("row {}", task_.output_row); }

  std::optional<Observation> nan_not_propagated(RuleMask rules) const {
    if (!norm_.nan_row || !(rules & bit(Rule::value))) return std::nullopt;
    const auto finite = std::find_if(slots_.begin(), slots_.end(),
                                     [](const SlotValue& s) { return s.valid && !std::isnan(s.got); });
    if (finite == slots_.end()) return std::nullopt;
    Observation o;
    o.covers = bit(Rule::value) | bit(Rule::greedy_exact);
    const bool nan = std::any_of(x_.begin(), x_.end(), [](float v) { return std::isnan(v); });
    const bool inf = std::any_of(x_.begin(), x_.end(), [](float v) { return v == std::numeric_limits<float>::infinity(); });
    o.figure = {double(nan), double(inf && !nan), double(!nan && !inf), 0};
    o.example = fmt::format("{}, token {}: {}", row_label(), finite->token, finite->got);
    return o;
  }

  // The neighbours of the evaluated token in the ragged token array (SPEC §2.4): the tokens one
  // position before and after it, with the sampled token as the position after the last one.
  std::vector<std::pair<int, std::uint32_t>> neighbours() const {
    const std::uint32_t b = task_.batch_item;
    const std::uint64_t r = batch_.lp_output_offsets[b + 1] - task_.output_row - 1;
    const std::uint64_t end = batch_.token_row_offsets[b + 1];  // the sampled token's position
    const std::uint64_t position = end - r;
    const auto token_at = [&](std::uint64_t p) -> std::optional<std::uint32_t> {
      if (p == end) return batch_.sampled_tokens[b];
      if (p < batch_.tokens.size()) return batch_.tokens[p];
      return std::nullopt;
    };
    std::vector<std::pair<int, std::uint32_t>> found;
    for (const int delta : {-1, +1}) {
      if ((delta < 0 && position == 0) || (delta > 0 && position >= end)) continue;
      if (const auto t = token_at(position + delta); t && *t < vocab()) found.emplace_back(delta, *t);
    }
    return found;
  }

  std::optional<Observation> misaligned(RuleMask rules) const {
    const std::uint32_t s = task_.token;
    const SlotValue& slot = last();
    const bool token_wrong = rules & bit(Rule::last_token);
    if (!token_wrong && !(slot.wrong && only_last_wrong())) return std::nullopt;
    for (const auto& [delta, neighbour] : neighbours()) {
      if (token_wrong ? slot.token != neighbour : x_[neighbour] == x_[s]) continue;
      if (!value_agrees(slot.got, static_cast<float>(exact_value(x_[neighbour], norm_)), tol_)) continue;
      Observation o;
      o.covers = bit(Rule::last_token) | bit(Rule::greedy_exact);
      if (only_last_wrong()) o.covers |= bit(Rule::value);
      if (got_.ranks && got_.lp_ranks[task_.output_row] == rank_of(x_, neighbour)) o.covers |= bit(Rule::rank);
      o.key = delta;
      o.example = fmt::format("{}: {} {} for {}", row_label(), token_wrong ? "token" : "the value of token", neighbour, s);
      return o;
    }
    return std::nullopt;
  }

  std::optional<Observation> clamped(RuleMask rules) const {
    if (norm_.nan_row || !(rules & bit(Rule::value))) return std::nullopt;
    std::optional<float> constant;
    std::array<double, 4> counts{};  // masked evaluated tokens, padding slots, finite values below it
    for (const SlotValue& s : slots_) {
      if (!s.wrong) continue;
      if (!std::isfinite(s.got) || !(s.want <= s.got) || (constant && std::bit_cast<std::uint32_t>(*constant) !=
                                                                           std::bit_cast<std::uint32_t>(s.got)))
        return std::nullopt;
      constant = s.got;
      ++counts[s.want == -kInf ? (s.token == vocab() ? 1 : 0) : 2];
    }
    if (!constant || counts[0] + counts[1] == 0) return std::nullopt;
    Observation o;
    o.covers = bit(Rule::value);
    o.figure = counts;
    o.key = std::bit_cast<std::uint32_t>(*constant);
    return o;
  }

  std::optional<Observation> rounded(RuleMask rules, LogitsDtype format) const {
    if (norm_.nan_row || !(rules & bit(Rule::value))) return std::nullopt;
    double worst_ulps = 0, worst_error = 0;
    std::uint64_t on_grid = 0;
    for (const SlotValue& s : slots_) {
      if (!s.valid) continue;
      if (!std::isfinite(s.got) || !std::isfinite(s.want)) {
        if (s.wrong) return std::nullopt;  // an infinity or NaN where the other is not: not a rounding
        continue;
      }
      if (s.got == 0) continue;  // on every grid
      if (round_to(format, s.got) != s.got) return std::nullopt;
      ++on_grid;
      const double error = std::fabs(double(s.got) - s.want);
      worst_error = std::max(worst_error, error);
      worst_ulps = std::max(worst_ulps, error / ulp_16(format, s.want));
    }
    if (on_grid == 0) return std::nullopt;
    Observation o;
    o.covers = bit(Rule::value);
    o.figure = {worst_ulps, worst_error, double(on_grid), 0};
    return o;
  }

  std::optional<Observation> temperature(RuleMask rules, bool inverted) {
    if (!batch_.temperatures || !(rules & bit(Rule::value)) || norm_.nan_row) return std::nullopt;
    const float t = (*batch_.temperatures)[task_.batch_item];
    if (t == 1.0f) return std::nullopt;
    std::vector<float> y(batch_.vocab);
    read_row(raw_, task_, y);
    if (inverted)
      for (float& v : y) v = v * t;
    const Normalizer norm = normalizer_of(y);
    if (norm.nan_row) return std::nullopt;
    const RowTolerance tol = row_tolerance(y, tolerance_);
    for (const SlotValue& s : slots_) {
      if (!s.valid) continue;
      const double want = s.token == vocab() ? -kInf : exact_value(y[s.token], norm);
      if (!value_agrees(s.got, static_cast<float>(want), tol)) return std::nullopt;
    }
    Observation o;
    o.covers = bit(Rule::value);
    o.figure = {t, t, 0, 0};
    return o;
  }

  // The logit x_j of logit row i, as output row `task_` would read it (its item's temperature).
  float logit(std::uint64_t i, std::uint32_t j) const {
    const std::byte* at = batch_.row_bytes(i) + j * dtype_bytes(batch_.dtype);
    float v;
    if (batch_.dtype == LogitsDtype::f32) {
      std::memcpy(&v, at, 4);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, at, 2);
      v = batch_.dtype == LogitsDtype::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
    return batch_.temperatures ? v / (*batch_.temperatures)[task_.batch_item] : v;
  }

  const Normalizer& cached_normalizer(std::uint64_t i, std::vector<float>& row) {
    const auto key = std::pair(i, task_.batch_item);
    if (const auto found = normalizers_.find(key); found != normalizers_.end()) return found->second;
    RowTask other = task_;
    other.logit_row = i;
    read_row(batch_, other, row);
    return normalizers_.emplace(key, normalizer_of(row)).first->second;
  }

  // Whether the reported slots are logit row i's answer: its top tokens, its values.
  bool answers_row(std::uint64_t i, std::vector<float>& row, const Normalizer& norm) const {
    if (norm.nan_row) return false;
    const RowTolerance tol = row_tolerance(row, tolerance_);
    std::vector<float> reported, top;
    for (const SlotValue& s : slots_) {
      if (!s.valid) return false;
      const bool padding = s.token == vocab() && s.slot < k_;
      if (s.slot < k_ && !padding) reported.push_back(row[s.token]);
      const double want = padding ? -kInf : exact_value(row[s.token], norm);
      if (!value_agrees(s.got, static_cast<float>(want), tol)) return false;
    }
    for (const float v : row)
      if (is_candidate(v)) top.push_back(v);
    const std::size_t kept = std::min<std::size_t>(k_, top.size());
    std::partial_sort(top.begin(), top.begin() + std::ptrdiff_t(kept), top.end(), std::greater<>());
    top.resize(kept);
    std::sort(reported.begin(), reported.end(), std::greater<>());
    (void)i;
    return reported == top;
  }

  std::optional<Observation> permuted(RuleMask rules) {
    if (!(rules & (bit(Rule::value) | kTopTokenRules | bit(Rule::last_token)))) return std::nullopt;
    std::vector<const SlotValue*> finite;
    for (const SlotValue& s : slots_)
      if (s.valid && s.token < vocab() && std::isfinite(s.got)) finite.push_back(&s);
    if (finite.empty()) return std::nullopt;
    const std::uint64_t own = task_.logit_row;
    const std::uint64_t half = kPermutationCandidates / 2;
    const std::uint64_t begin = batch_.rows <= kPermutationCandidates ? 0 : own - std::min(own, half);
    const std::uint64_t end = batch_.rows <= kPermutationCandidates ? batch_.rows : std::min(batch_.rows, own + half);
    std::vector<float> row(batch_.vocab);
    for (std::uint64_t i = begin; i < end; ++i) {
      if (i == own) continue;
      // A quick look first: two values imply one normalizer of row i, or one value its normalizer.
      const double implied = double(finite.front()->got) - logit(i, finite.front()->token);
      if (finite.size() > 1) {
        const SlotValue& other = *finite.back();
        if (!(std::fabs(double(other.got) - (logit(i, other.token) + implied)) <= 1e-3 * (1 + std::fabs(other.got))))
          continue;
        RowTask t = task_;
        t.logit_row = i;
        read_row(batch_, t, row);
        if (!answers_row(i, row, normalizer_of(row))) continue;
      } else {
        const Normalizer& norm = cached_normalizer(i, row);
        if (norm.nan_row || !(std::fabs(implied - norm.n) <= 1e-3 * (1 + std::fabs(norm.n)))) continue;
        RowTask t = task_;
        t.logit_row = i;
        read_row(batch_, t, row);
        if (!answers_row(i, row, norm)) continue;
      }
      Observation o;
      o.covers = kEveryRule;
      if (got_.ranks && got_.lp_ranks[task_.output_row] != rank_of(row, last().token)) o.covers &= ~bit(Rule::rank);
      o.key = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(own);
      o.example = fmt::format("output row {} holds logit row {}'s answer where SPEC §2.3 reads logit row {}",
                              task_.output_row, i, own);
      return o;
    }
    return std::nullopt;
  }

  std::optional<Observation> off_by_one(RuleMask rules) const {
    if (k_ == 0 || !(rules & kTopTokenRules)) return std::nullopt;
    for (const int delta : {+1, -1}) {
      std::vector<float> mapped;
      bool fits = true;
      for (std::uint64_t slot = 0; slot < k_ && fits; ++slot) {
        const SlotValue& s = slots_[slot];
        // Padding, unless it is the last token moved up to V (then finite).
        if (s.token == vocab() && !(delta > 0 && std::isfinite(s.got))) continue;
        const std::int64_t u = std::int64_t{s.token} - delta;
        fits = u >= 0 && u < std::int64_t(batch_.vocab) && is_candidate(x_[u]) &&
               value_agrees(s.got, static_cast<float>(exact_value(x_[u], norm_)), tol_);
        if (fits) mapped.push_back(x_[u]);
      }
      std::sort(mapped.begin(), mapped.end(), std::greater<>());
      if (!fits || mapped != top_) continue;
      Observation o;
      o.covers = kTopTokenRules | bit(Rule::value) | bit(Rule::greedy_exact);
      if (last().token == std::int64_t{task_.token} + delta) o.covers |= bit(Rule::last_token);
      o.key = delta;
      o.example = fmt::format("{}: token {} for {}", row_label(), slots_[0].token, std::int64_t{slots_[0].token} - delta);
      return o;
    }
    return std::nullopt;
  }

  std::optional<Observation> padding_wrong(RuleMask rules) const {
    if (!(rules & bit(Rule::padding_count)) || (rules & (bit(Rule::token_range) | bit(Rule::duplicate_token))))
      return std::nullopt;
    std::vector<float> reported;
    double padding = 0, filled = 0;
    for (std::uint64_t slot = 0; slot < k_; ++slot) {
      const std::uint32_t t = slots_[slot].token;
      if (t == vocab())
        ++padding;
      else if (is_candidate(x_[t]))
        reported.push_back(x_[t]);
      else
        ++filled;
    }
    std::sort(reported.begin(), reported.end(), std::greater<>());
    if (!std::equal(reported.begin(), reported.end(), top_.begin(), top_.begin() + std::ptrdiff_t(std::min(reported.size(), top_.size()))) ||
        reported.size() > top_.size())
      return std::nullopt;
    Observation o;
    o.covers = bit(Rule::padding_count) | bit(Rule::not_candidate);
    o.figure = {padding, double(k_ - top_.size()), filled, double(top_.size())};
    return o;
  }

  // 1 + the number of candidates with a larger x: where x_t stands in the row (sorted_candidates()
  // called first).
  double position_of(float v) const {
    return 1 + double(std::upper_bound(sorted_candidates_.begin(), sorted_candidates_.end(), v, std::greater<>()) -
                      sorted_candidates_.begin()) -
           double(std::count(sorted_candidates_.begin(), sorted_candidates_.end(), v));
  }

  std::optional<Observation> topk_not_exact(RuleMask rules) {
    if (!(rules & bit(Rule::not_top)) ||
        (rules & (bit(Rule::token_range) | bit(Rule::duplicate_token) | bit(Rule::not_candidate) |
                  bit(Rule::padding_count))))
      return std::nullopt;
    sorted_candidates();  // for position_of
    std::multiset<float, std::greater<>> missing(top_.begin(), top_.end());
    double outside = 0, worst_position = 0;
    for (std::uint64_t slot = 0; slot < k_; ++slot) {
      const SlotValue& s = slots_[slot];
      if (s.token == vocab()) continue;
      if (s.wrong) return std::nullopt;  // the values must be right for the tokens given
      const float v = x_[s.token];
      if (const auto found = missing.find(v); found != missing.end()) {
        missing.erase(found);
      } else {
        ++outside;
        worst_position = std::max(worst_position, position_of(v));
      }
    }
    if (outside == 0) return std::nullopt;
    Observation o;
    o.covers = bit(Rule::not_top);
    o.figure = {outside, worst_position, missing.empty() ? 0 : position_of(*missing.begin()),
                missing.empty() ? 0 : position_of(*missing.rbegin())};
    return o;
  }

  std::optional<Observation> rank_strict(RuleMask rules) const {
    if (!(rules & bit(Rule::rank)) || !got_.ranks) return std::nullopt;
    const float xs = x_[task_.token];
    if (std::isnan(xs)) return std::nullopt;
    const auto strict = static_cast<std::uint32_t>(std::count_if(x_.begin(), x_.end(), [xs](float v) { return v > xs; }));
    const std::uint32_t rank = got_.lp_ranks[task_.output_row];
    if (rank != strict && rank != strict + 1) return std::nullopt;
    Observation o;
    o.covers = bit(Rule::rank);
    o.key = rank == strict ? 0 : 1;
    o.example = fmt::format("{}: rank {} for {}", row_label(), rank, rank_of(x_, task_.token));
    return o;
  }

 public:
  // A row that passed, read as a witness for the normalizer classes: its offset d (about 0) and
  // how far a bug's offset could be from it with the row still passing (its whole tolerance).
  std::optional<Shift> witness(std::uint64_t output_row) {
    task_ = tasks_[output_row];
    x_.resize(batch_.vocab);
    read_row(batch_, task_, x_);
    norm_ = normalizer_of(x_);
    tol_ = row_tolerance(x_, tolerance_);
    read_slots();
    std::optional<Shift> s = shift(bit(Rule::value), false);
    if (!s) return std::nullopt;
    double allowed = 0;
    for (const SlotValue& v : slots_)
      if (v.valid && std::isfinite(v.want)) allowed = std::max(allowed, tol_.allowed(v.want));
    s->u += allowed;
    s->top_n.reset();
    s->prefix.reset();
    return s;
  }

 private:

  // Every candidate x of the row, descending: sorted once per row, when first asked for.
  const std::vector<float>& sorted_candidates() {
    if (!sorted_) {
      sorted_candidates_.clear();
      for (const float v : x_)
        if (is_candidate(v)) sorted_candidates_.push_back(v);
      std::sort(sorted_candidates_.begin(), sorted_candidates_.end(), std::greater<>());
      sorted_ = true;
    }
    return sorted_candidates_;
  }

  // `counts`: also the N and V' of a row whose values are too high (not for a witness).
  std::optional<Shift> shift(RuleMask rules, bool counts = true) {
    if (norm_.nan_row || !(rules & bit(Rule::value))) return std::nullopt;
    double lo = -kInf, hi = kInf;
    bool any = false;
    for (const SlotValue& s : slots_) {
      if (!s.valid) continue;
      if (!std::isfinite(s.got) || !std::isfinite(s.want)) {
        if (s.wrong) return std::nullopt;
        continue;
      }
      // Values right relative to each other: each d_j within its own rounding of one d.
      const double d = double(s.got) - s.want;
      const double rounding = std::max(tolerance_.ulps, 1.0) * ulp_f32(static_cast<float>(s.want));
      lo = std::max(lo, d - rounding);
      hi = std::min(hi, d + rounding);
      any = true;
    }
    if (!any || lo > hi) return std::nullopt;
    Shift shift;
    shift.d = (lo + hi) / 2;
    shift.u = (hi - lo) / 2 + tol_.sum_err +
              ulp_f32(static_cast<float>(std::fabs(norm_.m) + std::log(double(batch_.vocab))));
    shift.log_total = norm_.m + norm_.log_sum;
    shift.masked = std::uint64_t(std::count(x_.begin(), x_.end(), -std::numeric_limits<float>::infinity()));
    if (counts && shift.d - shift.u > 0) {
      // S e^-d against the row's partial sums: in index order (a truncated row), then largest
      // first (the candidates sorted once per row; -inf entries add nothing).
      std::vector<double> sums(x_.size());
      double total = 0;
      for (std::size_t j = 0; j < x_.size(); ++j) sums[j] = total += std::exp(double(x_[j]) - norm_.m);
      const double lo_sum = std::exp(norm_.log_sum - shift.d - shift.u);
      const double hi_sum = std::exp(norm_.log_sum - shift.d + shift.u);
      shift.prefix = counts_within(sums, lo_sum, hi_sum);
      const std::vector<float>& sorted = sorted_candidates();
      sums.resize(sorted.size());
      total = 0;
      for (std::size_t j = 0; j < sorted.size(); ++j) sums[j] = total += std::exp(double(sorted[j]) - norm_.m);
      if (!sums.empty()) shift.top_n = counts_within(sums, lo_sum, hi_sum);
    }
    return shift;
  }

  const RaggedBatch& batch_;
  const std::uint32_t k_;
  const ResultData& got_;
  const Tolerance& tolerance_;
  const std::vector<RowTask> tasks_;
  RaggedBatch raw_;  // the batch without its temperatures
  RowTask task_{};
  std::vector<float> x_;
  Normalizer norm_;
  RowTolerance tol_;
  std::vector<SlotValue> slots_;
  std::vector<float> top_;                // the K largest candidate x, descending
  std::vector<float> sorted_candidates_;  // every candidate x, descending (sorted_candidates())
  bool sorted_ = false;
  std::map<std::pair<std::uint64_t, std::uint32_t>, Normalizer> normalizers_;  // (logit row, item)
};


// ---- pass 2 -----------------------------------------------------------------------------------

// What one class explains over the rows: the rows, and each figure's range and total.
struct Tally {
  std::vector<std::uint64_t> rows;
  std::array<double, 4> lo{kInf, kInf, kInf, kInf}, hi{-kInf, -kInf, -kInf, -kInf}, total{};
  std::set<std::int64_t> keys;
  std::string example;
  void add(std::uint64_t row, const Observation& o) {
    rows.push_back(row);
    for (std::size_t i = 0; i < o.figure.size(); ++i) {
      lo[i] = std::min(lo[i], o.figure[i]);
      hi[i] = std::max(hi[i], o.figure[i]);
      total[i] += o.figure[i];
    }
    keys.insert(o.key);
    if (example.empty()) example = o.example;
  }
};

std::optional<Observation>& seen_of(RowObservations& row, BugClass bug) { return row.seen[static_cast<int>(bug)]; }

// What must be one value over the rows: neg_inf_clamped's constant (the most common one) and the
// 16-bit format (bf16 when every rounded row fits it, whose grid lies within f16's).
void settle_constants(std::vector<RowObservations>& rows) {
  std::map<std::int64_t, int> votes;
  for (RowObservations& row : rows)
    if (const auto& o = seen_of(row, BugClass::neg_inf_clamped)) ++votes[o->key];
  if (!votes.empty()) {
    const auto best = std::max_element(votes.begin(), votes.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    for (RowObservations& row : rows)
      if (auto& o = seen_of(row, BugClass::neg_inf_clamped); o && o->key != best) o.reset();
  }
  const bool all_bf16 = std::all_of(rows.begin(), rows.end(), [](RowObservations& row) {
    return seen_of(row, BugClass::values_rounded_bf16) || !seen_of(row, BugClass::values_rounded_f16);
  });
  for (RowObservations& row : rows) {
    if (all_bf16)
      seen_of(row, BugClass::values_rounded_f16).reset();
    else if (seen_of(row, BugClass::values_rounded_f16))
      seen_of(row, BugClass::values_rounded_bf16).reset();
  }
}

// The order in which the classes take a row's rules: the whole-row explanations first, the
// specific value fingerprints before the normalizer classes (taken last, in normalizer_finding).
constexpr BugClass kClaimOrder[] = {
    BugClass::nan_not_propagated,  BugClass::rows_permuted,       BugClass::evaluated_token_misaligned,
    BugClass::neg_inf_clamped,     BugClass::values_rounded_bf16, BugClass::values_rounded_f16,
    BugClass::temperature_not_applied, BugClass::temperature_inverted, BugClass::tokens_off_by_one,
    BugClass::padding_count_wrong, BugClass::topk_not_exact,      BugClass::rank_strict,
};

std::string figure_text(double v) { return fmt::format("{:.3g}", v); }

std::string count_range(double lo, double hi) {
  return lo == hi ? fmt::format("{:g}", lo) : fmt::format("{:g} to {:g}", lo, hi);
}

// "0.0001 to 0.0131 below", "2e-05 above", "from 0.001 below to 0.002 above".
std::string offset_text(double lo, double hi) {
  const auto range = [](double a, double b) {
    return figure_text(a) == figure_text(b) ? figure_text(a) : figure_text(a) + " to " + figure_text(b);
  };
  if (hi < 0) return range(-hi, -lo) + " below";
  if (lo > 0) return range(lo, hi) + " above";
  return "from " + figure_text(-lo) + " below to " + figure_text(hi) + " above";
}

std::string plural(double count, const char* one, const char* many) {
  return fmt::format("{:g} {}", count, count == 1 ? one : many);
}

std::string evidence_of(BugClass bug, const Tally& t, std::uint32_t k) {
  const std::string rows = rows_text(t.rows);
  switch (bug) {
    case BugClass::nan_not_propagated: {
      std::vector<std::string> what;
      if (t.total[0] > 0) what.push_back("a NaN (" + plural(t.total[0], "row", "rows") + ")");
      if (t.total[1] > 0) what.push_back("a +inf (" + plural(t.total[1], "row", "rows") + ")");
      if (t.total[2] > 0) what.push_back("only -inf (" + plural(t.total[2], "row", "rows") + ")");
      return fmt::format("{}: {} among the logits, yet values reported finite ({}) where SPEC §3 makes every value "
                         "NaN: a NaN or infinity skipped (an fmax, or read as -inf), not propagated",
                         rows, fmt::join(what, " or "), t.example);
    }
    case BugClass::rows_permuted:
      return fmt::format("{}: each holds the answer for another logit row ({}{}): a ragged offset bug, the logit "
                         "row of an output row misread from the offsets",
                         rows, t.example,
                         t.keys.size() == 1 ? fmt::format("; every one {:+} rows off", *t.keys.begin()) : "");
    case BugClass::evaluated_token_misaligned:
      return fmt::format("{}: the last slot evaluates the token {} the one SPEC §2.4 names in the ragged token array "
                         "({}): the token that followed position i read at the wrong offset",
                         rows,
                         t.keys.size() > 1 ? "one position beside" : *t.keys.begin() < 0 ? "one position before"
                                                                                        : "one position after",
                         t.example);
    case BugClass::neg_inf_clamped: {
      std::vector<std::string> what;
      if (t.total[0] > 0) what.push_back(plural(t.total[0], "masked evaluated token", "masked evaluated tokens"));
      if (t.total[1] > 0) what.push_back(plural(t.total[1], "padding slot", "padding slots"));
      if (t.total[2] > 0) what.push_back(plural(t.total[2], "finite value below it", "finite values below it"));
      const float constant = std::bit_cast<float>(static_cast<std::uint32_t>(*t.keys.begin()));
      return fmt::format("{}: {} values that SPEC makes -inf or lower ({}) reported as {}: -inf replaced by a finite "
                         "constant (as servers clamp for JSON)",
                         rows, t.total[0] + t.total[1] + t.total[2], fmt::join(what, ", "), constant);
    }
    case BugClass::values_rounded_bf16:
    case BugClass::values_rounded_f16: {
      const char* format = bug == BugClass::values_rounded_bf16 ? "bf16" : "f16";
      if (t.hi[0] <= 0.51)
        return fmt::format("{}: every value on the {} grid and within half a {} ulp of the reference (errors up to "
                           "{}): values rounded to {} after a right computation (a 16-bit output dtype)",
                           rows, format, format, figure_text(t.hi[1]), format);
      return fmt::format("{}: every value on the {} grid, errors up to {:.3g} {} ulps ({}), more than one rounding: "
                         "computed in {}, not only stored in it",
                         rows, format, t.hi[0], format, figure_text(t.hi[1]), format);
    }
    case BugClass::temperature_not_applied:
      return fmt::format("{}: every value matches the reference computed at T = 1 (temperatures {}): the logits not "
                         "divided by the temperature (SPEC §2.5)",
                         rows, count_range(t.lo[0], t.hi[0]));
    case BugClass::temperature_inverted:
      return fmt::format("{}: every value matches the reference computed from x * T instead of x / T (temperatures "
                         "{}): the temperature multiplies the logits instead of dividing them (SPEC §2.5)",
                         rows, count_range(t.lo[0], t.hi[0]));
    case BugClass::tokens_off_by_one:
      return fmt::format("{}: every top token one {} a token with the right logit ({}), the values right for those: "
                         "a token index off by one (1-based token ids, or an offset into a padded row)",
                         rows, t.keys.size() > 1 ? "beside" : *t.keys.begin() > 0 ? "above" : "below", t.example);
    case BugClass::padding_count_wrong:
      return fmt::format("{}: {} padding slots where SPEC §2.7 asks {} (K = {}, {} candidates){}: padding not counted "
                         "as SPEC §2.7 says (the candidates are the entries above -inf, not NaN)",
                         rows, count_range(t.lo[0], t.hi[0]), count_range(t.lo[1], t.hi[1]), k,
                         count_range(t.lo[3], t.hi[3]),
                         t.total[2] > 0 ? ", the other slots holding " +
                                              plural(t.total[2], "masked (-inf or NaN) token", "masked (-inf or NaN) tokens")
                                        : "");
    case BugClass::topk_not_exact:
      // figure 1: the worst position of a token given; 2 and 3: the first and the last position missing.
      return fmt::format("{}: {} of the {} top tokens outside the true top {} (standing as low as position {:g} of the "
                         "row, while the true top {}'s {} {} missing), their values right for the tokens given: an "
                         "approximate or misindexed top-k",
                         rows, count_range(t.lo[0], t.hi[0]), k, k, t.hi[1], k,
                         t.lo[2] == t.hi[3] ? fmt::format("position {:g}", t.lo[2])
                                            : fmt::format("positions {:g} to {:g}", t.lo[2], t.hi[3]),
                         t.lo[2] == t.hi[3] ? "is" : "are");
    case BugClass::rank_strict:
      return fmt::format("{}: {}, where SPEC §2.9 counts the x_j >= x_s ({}): ranks counted with > instead of >=",
                         rows,
                         t.keys.size() > 1    ? "every rank counts the x_j > x_s, some plus 1"
                         : *t.keys.begin() == 0 ? "every rank counts the x_j > x_s"
                                                : "every rank is 1 + the count of x_j > x_s (ties ranked best)",
                         t.example);
    default:
      return rows;
  }
}

struct ShiftedRow {
  std::uint64_t row;
  Shift shift;
};

// The middle of the intersection of the intervals, or nothing when it is empty.
std::optional<double> common_value(const std::vector<std::pair<double, double>>& intervals) {
  double lo = -kInf, hi = kInf;
  for (const auto& [a, b] : intervals) {
    lo = std::max(lo, a);
    hi = std::min(hi, b);
  }
  if (intervals.empty() || lo > hi) return std::nullopt;
  return std::isfinite(lo) && std::isfinite(hi) ? (lo + hi) / 2 : std::isfinite(lo) ? lo : hi;
}

// The count common to every row's range, when every row has one: one N for all (the caller
// decides whether the range is narrow enough to name).
std::optional<std::pair<std::uint64_t, std::uint64_t>> common_count(
    const std::vector<ShiftedRow>& rows, std::optional<std::pair<std::uint64_t, std::uint64_t>> Shift::*range) {
  std::uint64_t lo = 0, hi = std::numeric_limits<std::uint64_t>::max();
  for (const ShiftedRow& r : rows) {
    if (!(r.shift.*range)) return std::nullopt;
    lo = std::max(lo, (r.shift.*range)->first);
    hi = std::min(hi, (r.shift.*range)->second);
  }
  if (lo > hi) return std::nullopt;
  return std::pair(lo, hi);
}

std::string mass_text(double mass) {
  return mass >= 10 ? fmt::format("{:.0f}", mass) : figure_text(mass);
}

std::string count_text(std::pair<std::uint64_t, std::uint64_t> n) {
  return n.first == n.second ? fmt::format("{}", n.first) : fmt::format("{} to {}", n.first, n.second);
}

// What a normalizer finding says when the batch cannot tell it from another that fits as well.
constexpr const char* kAlikeRows =
    " (these rows' sums are alike, so one offset would fit them as well: a batch of rows of "
    "different shapes tells the two apart)";

// The normalizer classes, for the rows whose values all move by one amount each: d_i on row i,
// to within u_i. Three explanations, each one parameter common to every row, T_i = e^(m + log S)
// the row's sum of e^x_j:
//   normalizer_shift         d_i = d                       (one offset)
//   normalizer_extra_mass    (e^-d_i - 1) T_i = M          (one mass added to every S)
//   normalizer_missing_mass  (1 - e^-d_i) T_i = M, or S the sum of each row's N largest
//                            entries, or of its first V' entries (one N for all)
// Where the rows' T_i differ (rows of different shapes), at most one fits, and that one is named.
// Where they are alike (one shape and one V: at V >= 128256 uniform rows' T_i agree to about 2%),
// an offset that fits also fits as a mass, and the batch cannot tell them apart. Then the name
// goes to the fingerprint that an offset does not make by chance, and the evidence says that the
// batch cannot tell:
//   - too high (d > 0): missing_mass only for a discrete fingerprint: the top N with N at most
//     V/2 (a top-candidates shortcut; a small offset maps to an N near V, as +2e-5 at V = 32000
//     maps to N ~ 31400; on confident rows, whose tail is tiny, N is known only to a range, such
//     as 773 to 1357, and is named with it), or the first V' entries with V' at most 99% of V
//     (a truncated row), within 1%. Else normalizer_shift.
//   - too low (d < 0): extra_mass when the mass is a count of entries, at least one of logit 0,
//     and a whole number where it is known to better than one entry (64 padding entries counted
//     is a mass of 64; an offset gives 4.7 as readily as 5). Else normalizer_shift.
// Up to kWitnesses rows that passed count as rows too (`witnesses`): an offset or a mass must
// leave them passing. With one row in all, any d is some mass and some N: normalizer_shift; an N
// (top or first entries) needs two failing rows.
Diagnosis normalizer_finding(const std::vector<ShiftedRow>& rows, const std::vector<Shift>& witnesses,
                             std::uint64_t vocab) {
  Diagnosis finding;
  double lo = kInf, hi = -kInf;
  std::vector<std::pair<double, double>> offsets, extra, missing, per_masked;
  // Each row's interval of d, of the log of the mass added to sum_j exp(x_j), log((e^-d - 1) T),
  // decreasing in d, and of the mass left out, log((1 - e^-d) T), increasing.
  const auto add_intervals = [&](const Shift& s) {
    const auto added = [&](double d) { return d < 0 ? std::log(std::expm1(-d)) + s.log_total : -kInf; };
    const auto left_out = [&](double d) { return d > 0 ? std::log(-std::expm1(-d)) + s.log_total : -kInf; };
    offsets.emplace_back(s.d - s.u, s.d + s.u);
    extra.emplace_back(added(std::min(s.d + s.u, 0.0)), added(s.d - s.u));
    missing.emplace_back(left_out(std::max(s.d - s.u, 0.0)), left_out(s.d + s.u));
  };
  bool all_masked = true;
  for (const ShiftedRow& r : rows) {
    finding.rows.push_back(r.row);
    const Shift& s = r.shift;
    lo = std::min(lo, s.d);
    hi = std::max(hi, s.d);
    add_intervals(s);
    all_masked &= s.masked > 0;
    if (s.masked > 0) {
      const double per = std::log(double(s.masked));
      per_masked.emplace_back(extra.back().first - per, extra.back().second - per);
    }
  }
  // The rows that passed hold the parameters too: one offset must leave them passing, and so must
  // one mass (64 padding entries beside e^20 move a confident row by 1e-7, and the same entries
  // fail its tempered neighbour by 4e-5: on the failing row alone they read as any offset).
  for (const Shift& w : witnesses) add_intervals(w);
  const std::string where = rows_text(finding.rows);
  const bool several = offsets.size() >= 2;
  const bool one_shift = common_value(offsets).has_value();
  const char* alike = one_shift ? kAlikeRows : "";
  if (hi < 0 && several) {
    // The mass as a count of entries of logit 0: [e^lo, e^hi] over the rows' common range.
    std::optional<std::pair<double, double>> count;
    {
      double a = -kInf, b = kInf;
      for (const auto& [x, y] : extra) a = std::max(a, x), b = std::min(b, y);
      if (a <= b) count = std::pair(std::exp(a), std::exp(b));
    }
    const bool whole_count = count && count->second >= 1 &&
                             (count->second - count->first >= 1 || std::floor(count->second) >= std::ceil(count->first));
    if (count && (!one_shift || whole_count)) {
      finding.bug = BugClass::normalizer_extra_mass;
      const double mass = std::sqrt(count->first * count->second);
      finding.evidence = fmt::format(
          "{}: every value {} the reference, as if about {} more entries of logit 0 (or one of logit {:.3g}) had "
          "been summed in S, the same mass on every row{}: entries counted that should not be, such as vocabulary "
          "padding or masked entries read as 0",
          where, offset_text(lo, hi), mass_text(mass), std::log(mass), one_shift ? alike : " whatever its sum");
      return finding;
    }
    if (const auto logit = all_masked && !one_shift ? common_value(per_masked) : std::nullopt) {
      finding.bug = BugClass::normalizer_extra_mass;
      finding.evidence = fmt::format(
          "{}: every value {} the reference, as if each row's masked (-inf) entries had been summed in S as logits "
          "of about {:.3g}: masked entries read as numbers",
          where, offset_text(lo, hi), *logit);
      return finding;
    }
  }
  if (lo > 0 && several) {
    finding.bug = BugClass::normalizer_missing_mass;
    const bool counted = rows.size() >= 2;  // one N on one row is any offset's
    const auto narrow = [](std::pair<std::uint64_t, std::uint64_t> n, double share) {
      return double(n.second) <= double(n.first) * (1 + share) + 1;
    };
    if (const auto n = counted ? common_count(rows, &Shift::top_n) : std::nullopt;
        n && (n->second <= vocab / 2 || (!one_shift && narrow(*n, 0.01)))) {
      finding.evidence = fmt::format(
          "{}: every value {} the reference, S the sum over each row's N = {} largest entries only{}: entries left "
          "out of S, such as a normalizer over the top candidates only",
          where, offset_text(lo, hi), count_text(*n), alike);
      return finding;
    }
    if (const auto n = counted ? common_count(rows, &Shift::prefix) : std::nullopt;
        n && narrow(*n, 0.01) && (!one_shift || double(n->second) <= 0.99 * double(vocab))) {
      finding.evidence = fmt::format(
          "{}: every value {} the reference, S the sum over each row's first {} of {} entries{}: entries left out of "
          "S, a truncated row",
          where, offset_text(lo, hi), count_text(*n), vocab, alike);
      return finding;
    }
    if (const auto mass = one_shift ? std::nullopt : common_value(missing)) {
      finding.evidence = fmt::format(
          "{}: every value {} the reference, as if about {} entries of logit 0 (or one of logit {:.3g}) had been "
          "left out of S on every row, the same mass whatever the row's sum: entries left out of S",
          where, offset_text(lo, hi), mass_text(std::exp(*mass)), *mass);
      return finding;
    }
  }
  finding.bug = BugClass::normalizer_shift;
  // Where a mass fits as well (rows alike), say so: the batch cannot tell them apart.
  const bool mass_fits = several && (hi < 0 ? common_value(extra).has_value() : lo > 0 && common_value(missing).has_value());
  finding.evidence =
      one_shift && several
          ? fmt::format("{}: every value {} the reference, by one amount on every row, the values right relative to "
                        "each other{}: a wrong normalizer n = -(m + log S), off by a constant",
                        where, offset_text(lo, hi),
                        mass_fits ? " (these rows' sums are alike, so one mass added to or left out of S would fit "
                                    "them as well: a batch of rows of different shapes tells the two apart)"
                                  : "")
          : fmt::format("{}: every value of a row off by one amount, {} the reference, the values right relative to "
                        "each other: a wrong normalizer n = -(m + log S), such as one from a stale maximum",
                        where, offset_text(lo, hi));
  return finding;
}

}  // namespace

const char* bug_class_name(BugClass bug) {
  switch (bug) {
    case BugClass::normalizer_shift: return "normalizer_shift";
    case BugClass::normalizer_extra_mass: return "normalizer_extra_mass";
    case BugClass::normalizer_missing_mass: return "normalizer_missing_mass";
    case BugClass::values_rounded_bf16: return "values_rounded_bf16";
    case BugClass::values_rounded_f16: return "values_rounded_f16";
    case BugClass::temperature_not_applied: return "temperature_not_applied";
    case BugClass::temperature_inverted: return "temperature_inverted";
    case BugClass::neg_inf_clamped: return "neg_inf_clamped";
    case BugClass::nan_not_propagated: return "nan_not_propagated";
    case BugClass::evaluated_token_misaligned: return "evaluated_token_misaligned";
    case BugClass::rows_permuted: return "rows_permuted";
    case BugClass::tokens_off_by_one: return "tokens_off_by_one";
    case BugClass::topk_not_exact: return "topk_not_exact";
    case BugClass::padding_count_wrong: return "padding_count_wrong";
    case BugClass::rank_strict: return "rank_strict";
  }
  return "unknown";
}

std::optional<BugClass> bug_class_from_name(std::string_view name) {
  for (int i = 0; i < kBugClassCount; ++i)
    if (name == bug_class_name(static_cast<BugClass>(i))) return static_cast<BugClass>(i);
  return std::nullopt;
}

std::string rows_text(std::span<const std::uint64_t> rows) {
  constexpr std::size_t kShownRanges = 6;
  std::vector<std::string> ranges;
  std::size_t shown = 0;
  for (std::size_t i = 0; i < rows.size() && ranges.size() < kShownRanges;) {
    std::size_t j = i;
    while (j + 1 < rows.size() && rows[j + 1] == rows[j] + 1) ++j;
    ranges.push_back(i == j ? fmt::format("{}", rows[i]) : fmt::format("{}-{}", rows[i], rows[j]));
    shown = j + 1;
    i = j + 1;
  }
  std::string text = fmt::format("{} {}", rows.size() == 1 ? "row" : "rows", fmt::join(ranges, ", "));
  if (shown < rows.size()) text += fmt::format(" and {} more", rows.size() - shown);
  return text;
}

std::vector<Diagnosis> diagnose(const RaggedBatch& batch, std::uint32_t k, const ResultData& got,
                                const Verdict& verdict, const Tolerance& tolerance) {
  if (verdict.failed_rows.empty()) return {};
  RowReader reader(batch, k, got, tolerance);
  const std::span<const FailedRow> diagnosed(verdict.failed_rows.data(),
                                             std::min<std::uint64_t>(verdict.failed_rows.size(), kDiagnosedRows));
  std::vector<RowObservations> rows;
  rows.reserve(diagnosed.size());
  for (const FailedRow& failed : diagnosed) rows.push_back(reader.observe(failed));
  settle_constants(rows);

  std::array<Tally, kBugClassCount> tallies;
  std::vector<ShiftedRow> shifted;
  for (RowObservations& row : rows) {
    RuleMask unclaimed = row.rules;
    for (const BugClass bug : kClaimOrder) {
      const auto& o = seen_of(row, bug);
      if (!o || (o->covers & unclaimed) == 0) continue;
      tallies[static_cast<int>(bug)].add(row.output_row, *o);
      unclaimed &= ~o->covers;
    }
    if ((unclaimed & bit(Rule::value)) && row.shift) shifted.push_back({row.output_row, *row.shift});
  }
  std::vector<Diagnosis> found;
  std::optional<Diagnosis> normalizer;
  if (!shifted.empty()) {
    // A few rows that passed, as witnesses (normalizer_finding says why).
    std::vector<Shift> witnesses;
    std::vector<bool> failed(batch.output_rows(), false);
    for (const FailedRow& row : verdict.failed_rows) failed[row.output_row] = true;
    for (std::uint64_t row = 0; row < failed.size() && witnesses.size() < kWitnesses; ++row)
      if (!failed[row])
        if (const auto w = reader.witness(row)) witnesses.push_back(*w);
    normalizer = normalizer_finding(shifted, witnesses, batch.vocab);
  }
  for (int i = 0; i < kBugClassCount; ++i) {
    const auto bug = static_cast<BugClass>(i);
    if (normalizer && normalizer->bug == bug) found.push_back(std::move(*normalizer));
    if (!tallies[i].rows.empty()) found.push_back({bug, tallies[i].rows, evidence_of(bug, tallies[i], k)});
  }
  if (diagnosed.size() < verdict.failed_rows.size())
    for (Diagnosis& d : found)
      d.evidence += fmt::format(" (read on the first {} of the {} failing rows)", diagnosed.size(),
                                verdict.failed_rows.size());
  return found;
}

}  // namespace logprobs
