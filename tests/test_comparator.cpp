// The comparator judged by planted faults: each kind of wrong result is caught and named, and
// each kind of right-but-different result (another tie-break, another slot order) passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/judge.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::uint32_t kK = 3;  // W = 4

// Three batch items, one row each (no echo), V = 8:
//   row 0: distinct logits; row 1: a three-way tie at the K-th place; row 2: only two
//   candidates (one padding slot), the evaluated token masked.
BatchData hand_batch() {
  BatchData b;
  b.vocab = b.row_stride = 8;
  b.rows = 3;
  b.logits = {0.5f, 1.5f, -2.0f, 3.25f, 0.0f, 2.0f, -1.0f, 1.0f,   //
              7.0f, 5.0f, 5.0f, 2.0f,  5.0f, 1.0f, 0.0f,  0.0f,   //
              -kInf, -kInf, 1.0f, -kInf, 2.5f, -kInf, -kInf, -kInf};
  b.sampled_tokens = {6, 4, 0};
  b.logit_row_offsets = b.lp_output_offsets = {0, 1, 2, 3};
  b.token_row_offsets = {0, 0, 0, 0};
  return b;
}

ResultData reference_of(const BatchData& b, std::uint32_t k = kK, bool ranks = false) {
  return run_backend(reference_backend(), b, k, ranks);
}

std::vector<Rule> rules(const Verdict& v) {
  std::vector<Rule> r;
  for (const Violation& x : v.violations) r.push_back(x.rule);
  return r;
}

// Logit row i of the batch (an f32 batch without temperatures: x itself).
std::span<const float> x_of(const BatchData& b, std::uint64_t i) { return b.view().logit_row(i); }

void set(ResultData& r, std::uint64_t row, std::uint64_t slot, std::uint32_t token, float value) {
  r.lp_tokens[row * r.width + slot] = token;
  r.lp_logits[row * r.width + slot] = value;
}

TEST(Comparator, ReferenceAgreesWithItselfWithZeroError) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  const Verdict v = compare_result(b, kK, ref, ref);
  EXPECT_TRUE(v.ok()) << v.violations.front().message();
  EXPECT_EQ(v.stats.rows, 3u);
  EXPECT_EQ(v.stats.max_abs_error, 0.0);
  EXPECT_EQ(v.stats.max_ulp_error, 0.0);
  EXPECT_EQ(v.stats.max_tolerance_used, 0.0);
}

TEST(Comparator, MaxPortAgreesAndItsErrorIsReportedEvenWhenPassing) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  const Verdict v = compare_result(b, kK, ref, run_backend(*find_backend("max"), b, kK));
  EXPECT_TRUE(v.ok()) << v.violations.front().message();
  EXPECT_GT(v.stats.values, 0u);
  // A tiny planted error passes and shows up in the stats.
  ResultData got = ref;
  got.lp_logits[1] = std::nextafter(got.lp_logits[1], kInf);
  const Verdict nudged = compare_result(b, kK, ref, got);
  EXPECT_TRUE(nudged.ok());
  EXPECT_EQ(nudged.stats.max_ulp_error, 1.0);
  EXPECT_GT(nudged.stats.max_abs_error, 0.0);
  EXPECT_GT(nudged.stats.max_tolerance_used, 0.0);
  EXPECT_LT(nudged.stats.max_tolerance_used, 1.0);
  // Twice the allowance fails, and reads as more than all of it.
  got.lp_logits[1] = float(double(ref.lp_logits[1]) + 2 * row_tolerance(x_of(b, 0), {}).allowed(ref.lp_logits[1]));
  const Verdict over = compare_result(b, kK, ref, got);
  EXPECT_FALSE(over.ok());
  EXPECT_GT(over.stats.max_tolerance_used, 1.0);
}

TEST(Comparator, WrongTokenFails) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ResultData got = ref;
  ASSERT_EQ(got.token(0, 2), 1u);           // third largest in row 0: token 1 (1.5)
  set(got, 0, 2, 7, got.value(0, 2));        // token 7 has logit 1.0, not among the top 3
  const Verdict v = compare_result(b, kK, ref, got);
  ASSERT_EQ(rules(v), std::vector{Rule::not_top});
  EXPECT_EQ(v.violations[0].batch, 0u);
  EXPECT_EQ(v.violations[0].output_row, 0u);
  EXPECT_EQ(v.violations[0].slot, 2u);
  EXPECT_EQ(v.violations[0].token, 7u);
  EXPECT_NE(v.violations[0].message().find("batch 0, output row 0, slot 2: top token got 7"), std::string::npos)
      << v.violations[0].message();
}

TEST(Comparator, WrongLastTokenFails) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ResultData got = ref;
  set(got, 1, 3, 5, got.value(1, 3));
  EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::last_token});
}

TEST(Comparator, DuplicateAndOutOfRangeTokensFail) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ResultData dup = ref;
  set(dup, 0, 1, dup.token(0, 0), dup.value(0, 0));
  const auto dup_rules = rules(compare_result(b, kK, ref, dup));
  EXPECT_NE(std::find(dup_rules.begin(), dup_rules.end(), Rule::duplicate_token), dup_rules.end());
  ResultData range = ref;
  set(range, 0, 1, 9, range.value(0, 1));
  const auto range_rules = rules(compare_result(b, kK, ref, range));
  EXPECT_NE(std::find(range_rules.begin(), range_rules.end(), Rule::token_range), range_rules.end());
}

TEST(Comparator, ValueOffByTenTimesToleranceFails) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  for (std::uint64_t slot = 0; slot < 4; ++slot) {
    ResultData got = ref;
    const float want = ref.value(0, slot);
    const double allowed = row_tolerance(x_of(b, 0), {}).allowed(want);
    got.lp_logits[slot] = static_cast<float>(want + 10 * allowed);
    const Verdict v = compare_result(b, kK, ref, got);
    ASSERT_EQ(rules(v), std::vector{Rule::value}) << "slot " << slot;
    EXPECT_EQ(v.violations[0].slot, slot);
    // ... while half the tolerance passes.
    got.lp_logits[slot] = static_cast<float>(want + 0.5 * allowed);
    EXPECT_TRUE(compare_result(b, kK, ref, got).ok()) << "slot " << slot;
  }
}

TEST(Comparator, EachToleranceTermIsAnOption) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ResultData got = ref;
  got.lp_logits[0] += 1e-3f;
  EXPECT_FALSE(compare_result(b, kK, ref, got).ok());
  EXPECT_TRUE(compare_result(b, kK, ref, got, Tolerance{.ulps = 1e5}).ok());
  EXPECT_TRUE(compare_result(b, kK, ref, got, Tolerance{.norm_ulps = 1e5}).ok());
  EXPECT_TRUE(compare_result(b, kK, ref, got, Tolerance{.floor = 1e5}).ok());
  EXPECT_TRUE(compare_result(b, kK, ref, got, Tolerance{.sum_rule = SumRule::sqrt, .sigma = 1e5}).ok());
  EXPECT_FALSE(compare_result(b, kK, ref, got, Tolerance{.sum_rule = SumRule::sqrt}).ok());
  EXPECT_FALSE(compare_result(b, kK, ref, got, Tolerance{.sum_rule = SumRule::linear}).ok())
      << "V * 2^-24 at V = 8 is tiny";
}

// One dominant logit and a flat sea 16.6 below it at V = 152064: the `max` port's f32 running
// sum drops almost every term, which SPEC §5's atol alone rejects and the summation term admits.
TEST(Comparator, SummationTermAdmitsTheF32SumWorstCaseAndNoMore) {
  BatchData b;
  b.vocab = b.row_stride = 152064;
  b.rows = 1;
  b.logits.assign(b.vocab, -16.6f);
  b.logits[0] = 0.0f;
  b.logit_row_offsets = b.lp_output_offsets = {0, 1};
  b.token_row_offsets = {0, 0};
  b.sampled_tokens = {5};
  const ResultData ref = reference_of(b, 1);
  const ResultData max_result = run_backend(*find_backend("max"), b, 1);
  const Verdict strict = compare_result(b, 1, ref, max_result);
  EXPECT_FALSE(strict.ok()) << "the default, calibrated on sums in 4 to 1024 lanes, rejects one f32 chain here";
  EXPECT_FALSE(compare_result(b, 1, ref, max_result, {.sum_rule = SumRule::sqrt}).ok());
  const Verdict v = compare_result(b, 1, ref, max_result, tolerance_for(*find_backend("max"), {}));
  EXPECT_TRUE(v.ok()) << v.violations.front().message();
  const double bound = std::ldexp(double(b.vocab), -24);
  EXPECT_GT(v.stats.max_abs_error, 0.5 * bound);  // the term is needed, not slack
  // A value off by ten times the widened tolerance still fails.
  ResultData got = ref;
  const Tolerance linear{.sum_rule = SumRule::linear};
  got.lp_logits[1] = static_cast<float>(ref.value(0, 1) + 10 * row_tolerance(b.logits, linear).allowed(ref.value(0, 1)));
  EXPECT_EQ(rules(compare_result(b, 1, ref, got, linear)), std::vector{Rule::value});
}

TEST(Comparator, NaNWhereANumberBelongsFails) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ResultData got = ref;
  got.lp_logits[1 * 4 + 0] = kNaN;
  const Verdict v = compare_result(b, kK, ref, got);
  ASSERT_EQ(rules(v), std::vector{Rule::value});
  EXPECT_EQ(v.violations[0].output_row, 1u);
}

TEST(Comparator, InfinityMatchesOnlyTheSameInfinity) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ASSERT_EQ(ref.value(2, 3), -kInf);  // row 2 evaluates masked token 0
  ASSERT_EQ(ref.value(2, 2), -kInf);  // and has one padding slot
  for (const float wrong : {kInf, kNaN, -1e30f}) {
    ResultData got = ref;
    got.lp_logits[2 * 4 + 3] = wrong;
    EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::value}) << wrong;
    got = ref;
    got.lp_logits[2 * 4 + 2] = wrong;
    EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::value}) << wrong;
  }
  ResultData got = ref;
  got.lp_logits[0] = -kInf;  // a finite value reported as -inf
  EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::value});
}

TEST(Comparator, WrongPaddingCountFails) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ASSERT_EQ(ref.token(2, 2), 8u);
  // A candidate reported as padding: one padding too many, and the K largest not all reported.
  ResultData more = ref;
  set(more, 2, 1, 8, -kInf);
  const auto more_rules = rules(compare_result(b, kK, ref, more));
  EXPECT_NE(std::find(more_rules.begin(), more_rules.end(), Rule::padding_count), more_rules.end());
  // Padding replaced by a masked token: one padding too few.
  ResultData fewer = ref;
  set(fewer, 2, 2, 3, -kInf);
  const auto fewer_rules = rules(compare_result(b, kK, ref, fewer));
  EXPECT_NE(std::find(fewer_rules.begin(), fewer_rules.end(), Rule::padding_count), fewer_rules.end());
  EXPECT_NE(std::find(fewer_rules.begin(), fewer_rules.end(), Rule::not_candidate), fewer_rules.end());
  // Padding in a row with enough candidates.
  ResultData spurious = ref;
  set(spurious, 0, 2, 8, -kInf);
  const auto spurious_rules = rules(compare_result(b, kK, ref, spurious));
  EXPECT_NE(std::find(spurious_rules.begin(), spurious_rules.end(), Rule::padding_count), spurious_rules.end());
}

TEST(Comparator, TieBrokenTheOtherWayPasses) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  // Row 1: 7 then three 5s (tokens 1, 2, 4) for two places; the reference keeps 1 and 2.
  ASSERT_EQ(ref.token(1, 1), 1u);
  ASSERT_EQ(ref.token(1, 2), 2u);
  ResultData got = ref;
  set(got, 1, 1, 4, ref.value(1, 1));
  set(got, 1, 2, 1, ref.value(1, 2));
  const Verdict v = compare_result(b, kK, ref, got);
  EXPECT_TRUE(v.ok()) << v.violations.front().message();
  // A tied token whose value is wrong still fails: ties are judged by the equal logit's value
  // (and token 4 is this row's evaluated token, so its last slot no longer holds the same bits).
  set(got, 1, 1, 4, ref.value(1, 1) + 0.01f);
  EXPECT_EQ(rules(compare_result(b, kK, ref, got)), (std::vector{Rule::greedy_exact, Rule::value}));
  // Two tied tokens that displace the larger logit fail.
  ResultData displaced = ref;
  set(displaced, 1, 0, 4, ref.value(1, 1));
  EXPECT_EQ(rules(compare_result(b, kK, ref, displaced)), std::vector{Rule::not_top});
}

TEST(Comparator, TopSlotsReorderedPass) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  ResultData got = ref;
  for (std::uint64_t row = 0; row < 3; ++row) {
    set(got, row, 0, ref.token(row, 2), ref.value(row, 2));
    set(got, row, 2, ref.token(row, 0), ref.value(row, 0));
  }
  const Verdict v = compare_result(b, kK, ref, got);
  EXPECT_TRUE(v.ok()) << v.violations.front().message();
}

TEST(Comparator, WrongShapeIsOneViolation) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b);
  const ResultData narrow(3, 2);
  const Verdict v = compare_result(b, kK, ref, narrow);
  ASSERT_EQ(rules(v), std::vector{Rule::shape});
  EXPECT_NE(v.violations[0].message().find("[3, 2]"), std::string::npos) << v.violations[0].message();
  ResultData short_values = ref;
  short_values.lp_logits.pop_back();
  EXPECT_EQ(rules(compare_result(b, kK, ref, short_values)), std::vector{Rule::shape});
}

TEST(Comparator, SpecialRowsFollowSpecSection3) {
  // Rows with NaN, +inf and only -inf: every value NaN, tokens as SPEC 2.6.
  BatchData b;
  b.vocab = b.row_stride = 4;
  b.rows = 3;
  b.logits = {1.0f, kNaN, 3.0f, 2.0f,  //
              1.0f, kInf, 3.0f, 0.5f,  //
              -kInf, -kInf, -kInf, -kInf};
  b.sampled_tokens = {0, 1, 2};
  b.logit_row_offsets = b.lp_output_offsets = {0, 1, 2, 3};
  b.token_row_offsets = {0, 0, 0, 0};
  const ResultData ref = reference_of(b);
  for (std::uint64_t i = 0; i < ref.lp_logits.size(); ++i) EXPECT_TRUE(std::isnan(ref.lp_logits[i])) << i;
  EXPECT_TRUE(compare_result(b, kK, ref, ref).ok());
  EXPECT_TRUE(compare_result(b, kK, ref, run_backend(*find_backend("max"), b, kK)).ok());
  // Token 1 (NaN) may not enter; +inf must enter first.
  ResultData got = ref;
  set(got, 0, 2, 1, kNaN);
  EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::not_candidate});
  got = ref;
  ASSERT_EQ(ref.token(1, 0), 1u);
  set(got, 1, 0, 3, kNaN);  // token 3 (0.5) in place of +inf
  EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::not_top});
  // A number where NaN belongs fails.
  got = ref;
  got.lp_logits[2 * 4 + 0] = -kInf;
  EXPECT_EQ(rules(compare_result(b, kK, ref, got)), std::vector{Rule::value});
}

TEST(Comparator, KZeroJudgesTheOneSlot) {
  const BatchData b = hand_batch();
  const ResultData ref = reference_of(b, 0);
  ASSERT_EQ(ref.width, 1u);
  EXPECT_TRUE(compare_result(b, 0, ref, ref).ok());
  ResultData got = ref;
  got.lp_logits[0] += 0.1f;
  EXPECT_EQ(rules(compare_result(b, 0, ref, got)), std::vector{Rule::value});
}

TEST(Comparator, NamesTheBatchOfARowInAnEchoBatch) {
  // Two batch items with two rows each; a fault in output row 3 belongs to batch 1.
  BatchData b;
  b.vocab = b.row_stride = 4;
  b.rows = 4;
  b.logits = {0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 2, 2, 0, 0, 0, 5};
  b.tokens = {1, 2, 3, 0};
  b.sampled_tokens = {0, 1};
  b.logit_row_offsets = b.token_row_offsets = b.lp_output_offsets = {0, 2, 4};
  const ResultData ref = reference_of(b, 1);
  ResultData got = ref;
  got.lp_logits[3 * 2 + 1] += 1.0f;
  const Verdict v = compare_result(b, 1, ref, got);
  ASSERT_EQ(rules(v), std::vector{Rule::value});
  EXPECT_EQ(v.violations[0].batch, 1u);
  EXPECT_EQ(v.violations[0].output_row, 3u);
  EXPECT_EQ(v.violations[0].slot, 1u);
  EXPECT_EQ(v.violations[0].token, 1u);  // sampled_tokens[1]
}

// SPEC §2.9: rank = the number of x_j >= x_s, NaN never counted, 0 for a NaN x_s; judged from the
// input, exactly.
TEST(Comparator, RanksAreJudgedExactly) {
  BatchData b = hand_batch();
  b.logits[2 * 8 + 0] = kNaN;  // row 2 evaluates token 0: a NaN x_s has rank 0
  const ResultData ref = reference_of(b, kK, /*ranks=*/true);
  EXPECT_EQ(ref.lp_ranks, (std::vector<std::uint32_t>{7, 4, 0}));  // -1 is 7th of 8; three 5s tie behind 7
  EXPECT_TRUE(compare_result(b, kK, ref, ref).ok());
  ResultData got = ref;
  got.lp_ranks[1] = 2;  // 1 + the count of x_j > x_s: the best rank among the ties, not the worst
  const Verdict v = compare_result(b, kK, ref, got);
  ASSERT_EQ(rules(v), std::vector{Rule::rank});
  EXPECT_NE(v.violations[0].message().find("rank of token 4 got 2 want 4"), std::string::npos)
      << v.violations[0].message();
  ResultData short_ranks = ref;
  short_ranks.lp_ranks.pop_back();
  EXPECT_EQ(rules(compare_result(b, kK, ref, short_ranks)), std::vector{Rule::shape});
}

// SPEC §6: when s is among the top tokens, its top value and the last slot's are the same bits.
TEST(Comparator, GreedyExactnessIsItsOwnRule) {
  BatchData b = hand_batch();
  b.sampled_tokens[0] = 3;  // row 0's largest logit: s is top slot 0
  const ResultData ref = reference_of(b);
  ASSERT_EQ(ref.token(0, 0), 3u);
  EXPECT_TRUE(compare_result(b, kK, ref, ref).ok());
  ResultData got = ref;
  got.lp_logits[3] = std::nextafter(got.lp_logits[3], kInf);  // the last slot, one ulp off: within tolerance
  const Verdict v = compare_result(b, kK, ref, got);
  ASSERT_EQ(rules(v), std::vector{Rule::greedy_exact});
  EXPECT_EQ(v.violations[0].slot, 0u);
  EXPECT_NE(v.violations[0].message().find("greedy-exact"), std::string::npos) << v.violations[0].message();
}

// The ULP figure leaves out values within 2^-10 of 0, where one ulp is a tiny error.
TEST(Comparator, TheUlpFigureSkipsValuesNearZero) {
  BatchData b = single_row_batch(std::vector<float>{20.0f, 0.0f, -1.0f}, 0);
  const ResultData ref = reference_of(b, 1);
  ASSERT_GT(ref.value(0, 0), -1.0f / 1024);  // the top log-probability, about -2e-9
  ResultData got = ref;
  got.lp_logits[0] = std::nextafter(std::nextafter(ref.lp_logits[0], kInf), kInf);
  got.lp_logits[1] = got.lp_logits[0];  // s is the top token: keep greedy-exactness
  const Verdict v = compare_result(b, 1, ref, got);
  EXPECT_TRUE(v.ok());
  EXPECT_GT(v.stats.max_abs_error, 0.0);
  EXPECT_EQ(v.stats.max_ulp_error, 0.0);
}

}  // namespace
}  // namespace logprobs
