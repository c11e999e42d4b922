// Helpers for the hand-written tests: building small batches, and the result SPEC §2 and §3 give
// for them worked out in double without calling the reference backend (the tests must be able to
// catch the reference too), judged by the harness's comparator like every other result.
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

#include "harness/batch_data.hpp"
#include "harness/judge.hpp"
#include "verdict_assertion.hpp"

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
inline std::span<const float> logit_row(const BatchData& batch, std::uint64_t i) { return batch.view().logit_row(i); }

// One batch item, one logit row, one output row evaluating `sampled`.
inline BatchData single_row(const std::vector<float>& x, std::uint32_t sampled) { return single_row_batch(x, sampled); }

// SPEC §2.6 in double with IEEE semantics: n = -(m + log sum exp(x - m)).
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

inline bool is_candidate(float v) { return !std::isnan(v) && v > -kInf; }

// The batch item that owns output row o (SPEC §2 step 1).
inline std::uint32_t batch_item_of(const RaggedBatch& batch, std::uint64_t o) {
  std::uint32_t b = 0;
  while (batch.lp_output_offsets[b + 1] <= o) ++b;
  return b;
}

// What output row o should read: its logit row and evaluated token, worked out by hand.
struct Want {
  std::uint64_t logit_row;
  std::uint32_t token;
};

// The result SPEC §2 and §3 give when output row o reads rows[o], written out plainly in double
// and independent of the reference backend, which these tests judge too: each value x_t + n
// rounded once to f32, the top slots the K largest candidates (value descending, token
// ascending), then padding (V, -inf + n), then the evaluated token.
inline ResultData expected_result(const RaggedBatch& batch, std::uint32_t k, const std::vector<Want>& rows) {
  const auto vocab = static_cast<std::uint32_t>(batch.vocab);
  ResultData want(rows.size(), slots_per_row(k));
  std::vector<float> x(vocab);
  for (std::uint64_t o = 0; o < rows.size(); ++o) {
    // x as SPEC §2.5 defines it (the f32 row, or a 16-bit one widened, over the temperature).
    read_row(batch, {o, rows[o].logit_row, rows[o].token, batch_item_of(batch, o)}, x);
    const double n = expected_normalizer(x);
    std::vector<std::uint32_t> top;
    for (std::uint32_t j = 0; j < vocab; ++j)
      if (is_candidate(x[j])) top.push_back(j);
    std::stable_sort(top.begin(), top.end(), [&](std::uint32_t a, std::uint32_t b) { return x[a] > x[b]; });
    top.resize(std::min<std::size_t>(k, top.size()));
    for (std::uint32_t slot = 0; slot < k; ++slot) {
      const bool padding = slot >= top.size();
      want.lp_tokens[o * want.width + slot] = padding ? vocab : top[slot];
      want.lp_logits[o * want.width + slot] = static_cast<float>((padding ? -double(kInf) : x[top[slot]]) + n);
    }
    want.lp_tokens[o * want.width + k] = rows[o].token;
    want.lp_logits[o * want.width + k] = static_cast<float>(double(x[rows[o].token]) + n);
  }
  return want;
}

// `got` judged by the comparator (SPEC §5) against the hand-computed result, output row o
// reading rows[o]; by default, the rows plan_rows gives.
inline ::testing::AssertionResult matches_by_hand(const RaggedBatch& batch, std::uint32_t k, const ResultData& got,
                                                  std::vector<Want> rows = {}, const Tolerance& tolerance = {}) {
  if (rows.empty())
    for (const RowTask& task : plan_rows(batch)) rows.push_back({task.logit_row, task.token});
  return testing_support::agrees(compare_result(batch, k, expected_result(batch, k, rows), got, tolerance));
}
inline ::testing::AssertionResult matches_by_hand(const BatchData& batch, std::uint32_t k, const ResultData& got,
                                                  std::vector<Want> rows = {}, const Tolerance& tolerance = {}) {
  return matches_by_hand(batch.view(), k, got, std::move(rows), tolerance);
}

// SPEC §5's value rule (the comparator's, value_agrees) for one value worked out by hand in
// double, in a row whose logits are x.
inline ::testing::AssertionResult value_close(float got, double want, std::span<const float> x) {
  if (value_agrees(got, static_cast<float>(want), row_tolerance(x, Tolerance{})))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " want " << want << " (off by "
                                       << std::abs(double(got) - want) << ")";
}

// The top slots of row o, sorted by (value desc, token asc) as the contract allows comparing
// them; NaN values sort last, by token.
inline std::vector<std::pair<float, std::uint32_t>> sorted_top_slots(const ResultData& result, std::uint64_t o,
                                                                     std::uint32_t k) {
  std::vector<std::pair<float, std::uint32_t>> slots;
  for (std::uint32_t slot = 0; slot < k; ++slot) slots.emplace_back(result.value(o, slot), result.token(o, slot));
  std::sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) {
    if (std::isnan(a.first) != std::isnan(b.first)) return std::isnan(b.first);
    if (!std::isnan(a.first) && a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  });
  return slots;
}

inline std::vector<std::uint32_t> sorted_top_tokens(const ResultData& result, std::uint64_t o, std::uint32_t k) {
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t slot = 0; slot < k; ++slot) tokens.push_back(result.token(o, slot));
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
  ResultData run(const BatchData& batch, std::uint32_t k) const { return run_backend(backend(), batch, k); }
  // matches_by_hand at the tolerance this backend is judged by (SPEC §5: one f32 chain or not).
  ::testing::AssertionResult judged_by_hand(const BatchData& batch, std::uint32_t k, const ResultData& got,
                                            std::vector<Want> rows = {}) const {
    return matches_by_hand(batch, k, got, std::move(rows), tolerance_for(backend(), {}));
  }
};

// The hand cases' suite, whose tests lie in several files of one executable.
using HandCase = EveryBackend;

// In a test of the suite: skip, saying why, a backend that does not implement what the case
// needs (SPEC §4).
#define SKIP_UNLESS_IMPLEMENTED(batch, k, ranks)                                                      \
  do {                                                                                               \
    const std::string lacking = missing_part(backend().features(), (batch).view(), (k), (ranks));    \
    if (!lacking.empty()) GTEST_SKIP() << backend().name() << " does not implement " << lacking;     \
  } while (0)

}  // namespace logprobs::hand
