// Contract v2 by hand, against every registered backend that implements each part (the others
// skip, saying which part they lack): K not of the form 2^L - 1, bf16 and f16 logits, a
// temperature that creates ties, T = 1 changing no bit, ranks with ties and with -inf and NaN
// as x_s, greedy-exactness, and the split result layout. Part of test_hand_cases.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "hand_case_support.hpp"
#include "harness/half_precision.hpp"
#include "harness/split_result.hpp"

namespace logprobs::hand {
namespace {

TEST_P(HandCase, KNotOfTheFormTwoToTheLMinusOne) {
  const std::uint32_t k = 5;
  const BatchData batch = single_row({0.5f, 3.0f, -1.0f, 2.0f, 1.5f, 0.0f, 2.5f, -2.0f}, /*sampled=*/6);
  SKIP_UNLESS_IMPLEMENTED(batch, k, false);
  const ResultData got = run(batch, k);
  ASSERT_EQ(got.width, 6u);
  EXPECT_EQ(sorted_top_tokens(got, 0, k), (std::vector<std::uint32_t>{0, 1, 3, 4, 6}));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

// Every value below is exact in bf16 (and its top is a tie the rounding made: 1.001 and 1.002
// both round to 1.0). The row is judged as its widened x.
TEST_P(HandCase, Bf16LogitsAreReadAs16Bits) {
  const std::uint32_t k = 3;
  const BatchData batch = with_dtype(single_row({1.001f, 1.002f, -2.5f, 0.25f, 1.0f, -kInf}, /*sampled=*/2),
                                     LogitsDtype::bf16);
  ASSERT_EQ(batch.logit(0, 0), 1.0f);
  SKIP_UNLESS_IMPLEMENTED(batch, k, false);
  const ResultData got = run(batch, k);
  const double n = -(1.0 + std::log(3.0 + std::exp(-3.5) + std::exp(-0.75)));
  EXPECT_EQ(sorted_top_tokens(got, 0, k), (std::vector<std::uint32_t>{0, 1, 4}));
  EXPECT_TRUE(value_close(got.value(0, 0), 1.0 + n, std::vector<float>{1, 1, -2.5f, 0.25f, 1, -kInf}));
  EXPECT_TRUE(value_close(got.value(0, k), -2.5 + n, std::vector<float>{1, 1, -2.5f, 0.25f, 1, -kInf}));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

// f16: a subnormal (6e-8 rounds to 2^-24), the largest f16 (65504) and a NaN payload.
TEST_P(HandCase, F16LogitsAreReadAs16Bits) {
  const std::uint32_t k = 3;
  BatchData batch = with_dtype(build({.rows = {{6e-8f, 1e-5f, 0.0f, -6e-5f, 65504.0f}, {1.0f, 2.0f, 3.0f, 0.5f, -1.0f}},
                                      .tokens = {},
                                      .sampled_tokens = {0, 2},
                                      .logit_row_offsets = {0, 1, 2},
                                      .token_row_offsets = {0, 0, 0},
                                      .lp_output_offsets = {0, 1, 2}}),
                               LogitsDtype::f16);
  ASSERT_EQ(batch.logit(0, 0), std::ldexp(1.0f, -24));
  batch.logits16[1 * batch.row_stride + 3] = 0x7e01;  // row 1: a quiet NaN with a payload
  SKIP_UNLESS_IMPLEMENTED(batch, k, false);
  const ResultData got = run(batch, k);
  EXPECT_EQ(got.token(0, 0) == 4 || got.token(0, 1) == 4 || got.token(0, 2) == 4, true) << "65504 is the top";
  EXPECT_TRUE(std::isnan(got.value(1, 0))) << "a NaN anywhere: every value NaN (SPEC §3)";
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

// Distinct x whose quotients by T = 3 round to the same f32: they tie after SPEC §2.5, so with
// K = 1 either may be kept, at the same value.
TEST_P(HandCase, ATemperatureThatCreatesTies) {
  const float a = std::nextafter(1.5f, 2.0f), b = std::nextafter(a, 2.0f);
  ASSERT_EQ(a / 3.0f, b / 3.0f);
  BatchData batch = single_row({b, 0.5f, a, -1.0f}, /*sampled=*/0);
  batch.temperatures = std::vector<float>{3.0f};
  const std::uint32_t k = 1;
  SKIP_UNLESS_IMPLEMENTED(batch, k, false);
  const ResultData got = run(batch, k);
  EXPECT_TRUE(got.token(0, 0) == 0 || got.token(0, 0) == 2) << got.token(0, 0);
  const float t = a / 3.0f;
  const double n = -(double(t) + std::log(2.0 + std::exp(double(0.5f / 3.0f) - t) + std::exp(double(-1.0f / 3.0f) - t)));
  EXPECT_TRUE(value_close(got.value(0, 0), t + n, std::vector<float>{t, 0.5f / 3.0f, t, -1.0f / 3.0f}));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, TemperatureOneGivesTheBitsOfNone) {
  const BatchData plain = single_row({0.3f, -1.7f, 2.9f, 2.9f, 0.0f, -kInf}, /*sampled=*/3);
  BatchData ones = plain;
  ones.temperatures = std::vector<float>{1.0f};
  SKIP_UNLESS_IMPLEMENTED(ones, 3, false);
  EXPECT_TRUE(same_bits(run(plain, 3), run(ones, 3)));
}

// SPEC §2.9: the number of x_j >= x_s; ties share the worst rank; -inf counts every non-NaN
// entry; NaN never counts, and a NaN x_s has rank 0.
TEST_P(HandCase, RanksWithTiesAndSpecialEvaluatedTokens) {
  const BatchData batch = build({.rows = {{2.0f, 1.0f, 2.0f, 2.0f, -kInf, 0.0f},
                                          {1.0f, -kInf, kNaN, 0.0f, -kInf, 2.0f},
                                          {1.0f, 0.5f, kNaN, 0.0f, 3.0f, 2.0f}},
                                 .tokens = {},
                                 .sampled_tokens = {3, 1, 2},
                                 .logit_row_offsets = {0, 1, 2, 3},
                                 .token_row_offsets = {0, 0, 0, 0},
                                 .lp_output_offsets = {0, 1, 2, 3}});
  SKIP_UNLESS_IMPLEMENTED(batch, 3, true);
  const ResultData got = run_backend(backend(), batch, 3, /*ranks=*/true);
  EXPECT_EQ(got.lp_ranks, (std::vector<std::uint32_t>{3, 5, 0}));
  EXPECT_TRUE(judged_by_hand(batch, 3, got));
}

// SPEC §6: the evaluated token is the top token, so its two values are the same bits.
TEST_P(HandCase, GreedyExactWhenTheEvaluatedTokenIsATopToken) {
  const BatchData batch = single_row({0.1f, 4.0f, -2.0f, 3.5f, 1.0f, 0.0f, 2.0f}, /*sampled=*/1);
  SKIP_UNLESS_IMPLEMENTED(batch, 3, false);
  const ResultData got = run(batch, 3);
  std::uint64_t slot = 0;
  while (slot < 3 && got.token(0, slot) != 1) ++slot;
  ASSERT_LT(slot, 3u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(got.value(0, slot)), std::bit_cast<std::uint32_t>(got.value(0, 3)));
  EXPECT_TRUE(judged_by_hand(batch, 3, got));
}

// SPEC §7's split layout: the top slots in any order, the evaluated token's value without its id.
TEST(SplitLayout, ReorderedTopSlotsPassAndAWrongTokenFails) {
  const BatchData batch = single_row({0.1f, 4.0f, -2.0f, 3.5f, 1.0f, 0.0f, 2.0f}, /*sampled=*/4);
  const ResultData ref = run_backend(reference_backend(), batch, 3);
  SplitResult split = split_from_packed(ref);
  std::swap(split.top_tokens[0], split.top_tokens[2]);
  std::swap(split.top_logprobs[0], split.top_logprobs[2]);
  EXPECT_TRUE(testing_support::agrees(compare_result(batch, 3, ref, packed_from_split(batch.view(), split))));
  split.top_tokens[1] = 0;  // x = 0.1 is not among the top 3
  EXPECT_FALSE(compare_result(batch, 3, ref, packed_from_split(batch.view(), split)).ok());
}

}  // namespace
}  // namespace logprobs::hand
