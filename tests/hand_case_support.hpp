// Helpers for the hand-written tests: building small batches, and judging one output row
// against SPEC §2, §3 and §5 from the row's logits alone, in double precision, without calling
// the reference backend (the tests must be able to catch the reference too).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "batch_data.hpp"

namespace logprobs {

// So that gtest names a backend parameter by its name rather than its address.
inline void PrintTo(const Backend* backend, std::ostream* os) { *os << backend->name(); }

}  // namespace logprobs

namespace logprobs::hand {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A batch written out as the test reads it: one inner vector per logit row, all of length V.
struct BatchSpec {
  std::vector<std::vector<float>> rows;
  std::vector<std::uint32_t> tokens;
  std::vector<std::uint32_t> sampled_tokens;
  std::vector<std::uint32_t> logit_row_offsets;
  std::vector<std::uint32_t> token_row_offsets;
  std::vector<std::uint32_t> lp_output_offsets;
  std::uint64_t extra_stride = 0;  // columns past V in each row, filled with poison
};

// The columns between V and the row stride hold values that would change any result they
// leaked into, so a backend that reads past V fails.
inline float stride_poison(std::uint64_t column) {
  constexpr float kPoison[] = {kNaN, kInf, 1e30f, -kInf};
  return kPoison[column % 4];
}

inline BatchData build(const BatchSpec& spec) {
  BatchData batch;
  batch.rows = spec.rows.size();
  batch.vocab = spec.rows.empty() ? 1 : spec.rows[0].size();
  batch.row_stride = batch.vocab + spec.extra_stride;
  batch.logits.resize(batch.rows * batch.row_stride);
  for (std::uint64_t i = 0; i < batch.rows; ++i) {
    EXPECT_EQ(spec.rows[i].size(), batch.vocab) << "row " << i << " of the spec";
    for (std::uint64_t j = 0; j < batch.row_stride; ++j)
      batch.row(i)[j] = j < batch.vocab ? spec.rows[i][j] : stride_poison(j - batch.vocab);
  }
  batch.tokens = spec.tokens;
  batch.sampled_tokens = spec.sampled_tokens;
  batch.logit_row_offsets = spec.logit_row_offsets;
  batch.token_row_offsets = spec.token_row_offsets;
  batch.lp_output_offsets = spec.lp_output_offsets;
  return batch;
}

// Logit row i of the batch: its first V entries.
inline std::span<const float> logit_row(const BatchData& batch, std::uint64_t i) {
  return {batch.logits.data() + i * batch.row_stride, batch.vocab};
}

// One batch item, one logit row, one output row evaluating `sampled`.
inline BatchData single_row(std::vector<float> x, std::uint32_t sampled) {
  return build({.rows = {std::move(x)},
                .tokens = {},
                .sampled_tokens = {sampled},
                .logit_row_offsets = {0, 1},
                .token_row_offsets = {0, 0},
                .lp_output_offsets = {0, 1}});
}

// SPEC §2.5 in double with IEEE semantics: n = -(m + log sum exp(x - m)).
// A NaN anywhere makes the max NaN; +inf gives inf - inf; only -inf gives -inf - -inf.
inline double expected_normalizer(std::span<const float> x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) {
    if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, double(v));
  }
  double sum = 0;
  for (float v : x) sum += std::exp(double(v) - m);
  return -(m + std::log(sum));
}

// The scale of the absolute tolerance: max(1, |m|), m the largest logit (1 when m is not finite,
// where every value is NaN or an infinity and compares exactly anyway).
inline double tolerance_scale(std::span<const float> x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x)
    if (!std::isnan(v)) m = std::max(m, double(v));
  return std::isfinite(m) ? std::max(1.0, std::abs(m)) : 1.0;
}

// The gap between |want| rounded to f32 and the next f32 up.
inline double f32_ulp(double want) {
  const float w = std::abs(static_cast<float>(want));
  return double(std::nextafter(w, kInf)) - double(w);
}

// SPEC §5 values: NaN matches NaN, an infinity the same infinity, else
// |got - want| <= 1e-5 * scale + 4 ulp(want).
inline ::testing::AssertionResult value_close(float got, double want, double scale) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << " want NaN";
  }
  if (std::isinf(want) || std::isinf(got) || std::isnan(got)) {
    if (double(got) == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << " want " << want;
  }
  const double error = std::abs(double(got) - want);
  const double allowed = 1e-5 * scale + 4 * f32_ulp(want);
  if (error <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " want " << want << " (off by " << error << " > "
                                       << allowed << ")";
}

inline bool is_candidate(float v) { return !std::isnan(v) && v > -kInf; }

// Judges output row `o` of `result` as SPEC §5 does, from the logits x of the row it should have
// read and the token s it should have evaluated:
//   - the last slot is (s, x_s + n);
//   - the non-padding top tokens are distinct candidates below V whose logits, as a multiset,
//     are the K largest candidate logits (any tie-breaking, any slot order);
//   - exactly max(0, K - candidates) slots are padding (V, -inf + n);
//   - every value is within tolerance of x_t + n, n from expected_normalizer.
inline ::testing::AssertionResult row_matches(const ResultData& result, std::uint64_t o, std::span<const float> x,
                                              std::uint32_t s, int levels) {
  const auto vocab = static_cast<std::uint32_t>(x.size());
  const std::uint32_t k = top_k(levels);
  if (result.width != slots_per_row(levels))
    return ::testing::AssertionFailure() << "width " << result.width << ", want " << slots_per_row(levels);
  if (o >= result.rows) return ::testing::AssertionFailure() << "row " << o << " of " << result.rows;

  const double n = expected_normalizer(x);
  const double scale = tolerance_scale(x);
  auto fail = [&](std::uint32_t slot) {
    return ::testing::AssertionFailure() << "output row " << o << ", slot " << slot << " (token "
                                         << result.token(o, slot) << ", value " << result.value(o, slot)
                                         << "): ";
  };

  if (result.token(o, k) != s) return fail(k) << "last slot's token, want " << s;
  if (auto close = value_close(result.value(o, k), double(x[s]) + n, scale); !close)
    return fail(k) << "last slot's value: " << close.message();

  std::vector<float> want_top;
  for (float v : x)
    if (is_candidate(v)) want_top.push_back(v);
  std::sort(want_top.begin(), want_top.end(), std::greater<>());
  want_top.resize(std::min<std::size_t>(k, want_top.size()));
  const std::uint64_t want_padding = k - want_top.size();

  std::vector<float> got_top;
  std::set<std::uint32_t> seen;
  std::uint64_t padding = 0;
  for (std::uint32_t slot = 0; slot < k; ++slot) {
    const std::uint32_t t = result.token(o, slot);
    const float v = result.value(o, slot);
    if (t == vocab) {
      ++padding;
      if (auto close = value_close(v, -double(kInf) + n, scale); !close)
        return fail(slot) << "padding value: " << close.message();
      continue;
    }
    if (t > vocab) return fail(slot) << "token above V = " << vocab;
    if (!seen.insert(t).second) return fail(slot) << "token repeated";
    if (!is_candidate(x[t])) return fail(slot) << "logit " << x[t] << " is not a candidate";
    got_top.push_back(x[t]);
    if (auto close = value_close(v, double(x[t]) + n, scale); !close) return fail(slot) << close.message();
  }
  if (padding != want_padding)
    return ::testing::AssertionFailure() << "output row " << o << ": " << padding << " padding slots, want "
                                         << want_padding;
  std::sort(got_top.begin(), got_top.end(), std::greater<>());
  if (got_top != want_top) {
    auto failure = ::testing::AssertionFailure() << "output row " << o << ": top logits";
    for (float v : got_top) failure << " " << v;
    failure << ", want";
    for (float v : want_top) failure << " " << v;
    return failure;
  }
  return ::testing::AssertionSuccess();
}

// The top slots of row o, sorted by (value desc, token asc) as the contract allows comparing
// them; NaN values sort last, by token.
inline std::vector<std::pair<float, std::uint32_t>> sorted_top_slots(const ResultData& result, std::uint64_t o,
                                                                     int levels) {
  std::vector<std::pair<float, std::uint32_t>> slots;
  for (std::uint32_t slot = 0; slot < top_k(levels); ++slot)
    slots.emplace_back(result.value(o, slot), result.token(o, slot));
  std::sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) {
    if (std::isnan(a.first) != std::isnan(b.first)) return std::isnan(b.first);
    if (!std::isnan(a.first) && a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  return slots;
}

inline std::vector<std::uint32_t> sorted_top_tokens(const ResultData& result, std::uint64_t o, int levels) {
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t slot = 0; slot < top_k(levels); ++slot) tokens.push_back(result.token(o, slot));
  std::sort(tokens.begin(), tokens.end());
  return tokens;
}

// Every backend in the build, for INSTANTIATE_TEST_SUITE_P.
inline std::vector<const Backend*> registered_backends() {
  const auto all = all_backends();
  return {all.begin(), all.end()};
}

inline std::string backend_test_name(const ::testing::TestParamInfo<const Backend*>& info) {
  std::string name(info.param->name());
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// A test fixture run once per registered backend; skipped, with the reason, where the backend
// is not available on this machine.
class EveryBackend : public ::testing::TestWithParam<const Backend*> {
 protected:
  void SetUp() override {
    const Availability availability = backend().availability();
    if (!availability.available) GTEST_SKIP() << backend().name() << " is unavailable: " << availability.reason;
  }
  const Backend& backend() const { return *GetParam(); }
  ResultData run(const BatchData& batch, int levels) const { return run_backend(backend(), batch, levels); }
};

}  // namespace logprobs::hand
