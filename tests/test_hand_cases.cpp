// SPEC §2 and §3 row by row, against every registered backend. Expected values are computed
// here, in double, written out plainly; the reference backend is judged like any other.
// Top slots are compared as the contract allows: as multisets or sorted, never by position.
#include <cmath>
#include <cstdint>
#include <vector>

#include "hand_case_support.hpp"

namespace logprobs::hand {
namespace {

using Slots = std::vector<std::pair<float, std::uint32_t>>;

// ---- SPEC §2: the finite row ------------------------------------------------------------------

TEST_P(HandCase, FiniteRowHasSortedTopValuesAndEvaluatedToken) {
  const std::uint32_t k = 3;  // K = 3, W = 4
  const BatchData batch = single_row({2, 0, -1, 3, 1}, /*sampled=*/2);
  const ResultData got = run(batch, k);

  const double n = -(3.0 + std::log(std::exp(-1.0) + std::exp(-3.0) + std::exp(-4.0) + 1.0 + std::exp(-2.0)));
  const Slots top = sorted_top_slots(got, 0, k);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].second, 3u);
  EXPECT_EQ(top[1].second, 0u);
  EXPECT_EQ(top[2].second, 4u);
  EXPECT_TRUE(value_close(top[0].first, 3.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(top[1].first, 2.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(top[2].first, 1.0 + n, logit_row(batch, 0)));
  EXPECT_EQ(got.token(0, 3), 2u);
  EXPECT_TRUE(value_close(got.value(0, 3), -1.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, UniformRowGivesMinusLogV) {
  const std::uint32_t k = 3;
  const BatchData batch = single_row({1, 1, 1, 1}, /*sampled=*/2);
  const ResultData got = run(batch, k);
  const double log_quarter = -std::log(4.0);
  for (std::uint32_t slot = 0; slot < 4; ++slot)
    EXPECT_TRUE(value_close(got.value(0, slot), log_quarter, logit_row(batch, 0)));
  const std::vector<std::uint32_t> tokens = sorted_top_tokens(got, 0, k);
  EXPECT_TRUE(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end()) << "top tokens repeat";
  EXPECT_LT(tokens.back(), 4u);
  EXPECT_EQ(got.token(0, 3), 2u);
}

// SPEC §2.6: fewer candidates than K leaves (V, -inf + n) padding.
TEST_P(HandCase, VocabSmallerThanKIsPadded) {
  const std::uint32_t k = 7;  // K = 7 > V = 3
  const BatchData batch = single_row({0.5f, -1, 2}, /*sampled=*/1);
  const ResultData got = run(batch, k);

  const double n = -(2.0 + std::log(std::exp(-1.5) + std::exp(-3.0) + 1.0));
  const Slots top = sorted_top_slots(got, 0, k);
  ASSERT_EQ(top.size(), 7u);
  EXPECT_EQ(top[0].second, 2u);
  EXPECT_EQ(top[1].second, 0u);
  EXPECT_EQ(top[2].second, 1u);
  EXPECT_TRUE(value_close(top[0].first, 2.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(top[1].first, 0.5 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(top[2].first, -1.0 + n, logit_row(batch, 0)));
  for (int i = 3; i < 7; ++i) {
    EXPECT_EQ(top[i].second, 3u) << "padding token is V";
    EXPECT_EQ(top[i].first, -kInf) << "padding value is -inf + n";
  }
  EXPECT_EQ(got.token(0, 7), 1u);
  EXPECT_TRUE(value_close(got.value(0, 7), -1.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

// SPEC §2.6: among equal logits at the K-th place any token may be kept.
TEST_P(HandCase, TieAtKthPlaceKeepsAnyOfTheTiedTokens) {
  const std::uint32_t k = 3;  // K = 3: token 1 (3.0) and two of tokens 2, 3, 4 (2.0)
  const BatchData batch = single_row({1, 3, 2, 2, 2, 0}, /*sampled=*/5);
  const ResultData got = run(batch, k);

  const std::set<std::vector<std::uint32_t>> accepted = {{1, 2, 3}, {1, 2, 4}, {1, 3, 4}};
  EXPECT_TRUE(accepted.contains(sorted_top_tokens(got, 0, k)))
      << "top tokens " << ::testing::PrintToString(sorted_top_tokens(got, 0, k));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, AllEqualRowKeepsAnyKDistinctTokens) {
  const std::uint32_t k = 3;
  const BatchData batch = single_row({5, 5, 5, 5, 5, 5, 5, 5}, /*sampled=*/7);
  const ResultData got = run(batch, k);
  for (std::uint32_t slot = 0; slot < 4; ++slot)
    EXPECT_TRUE(value_close(got.value(0, slot), -std::log(8.0), logit_row(batch, 0)));
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

// ---- SPEC §3: special values ------------------------------------------------------------------

TEST_P(HandCase, MaskedMinusInfNeverEntersAndPadsWhenFewFinite) {
  const std::uint32_t k = 7;  // K = 7, three finite entries
  const BatchData batch = single_row({-kInf, 1, -kInf, 2, 0.5f, -kInf}, /*sampled=*/0);
  const ResultData got = run(batch, k);

  const double n = -(2.0 + std::log(std::exp(-1.0) + 1.0 + std::exp(-1.5)));
  const Slots top = sorted_top_slots(got, 0, k);
  EXPECT_EQ(top[0].second, 3u);
  EXPECT_EQ(top[1].second, 1u);
  EXPECT_EQ(top[2].second, 4u);
  EXPECT_TRUE(value_close(top[0].first, 2.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(top[1].first, 1.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(top[2].first, 0.5 + n, logit_row(batch, 0)));
  for (int i = 3; i < 7; ++i) {
    EXPECT_EQ(top[i].second, 6u);
    EXPECT_EQ(top[i].first, -kInf);
  }
  EXPECT_EQ(got.token(0, 7), 0u);
  EXPECT_EQ(got.value(0, 7), -kInf) << "the evaluated token is masked";
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, MaskedMinusInfWithMoreFiniteThanK) {
  const std::uint32_t k = 1;  // K = 1
  const BatchData batch = single_row({-kInf, 1, -kInf, 2, 0.5f}, /*sampled=*/4);
  const ResultData got = run(batch, k);
  const double n = -(2.0 + std::log(std::exp(-1.0) + 1.0 + std::exp(-1.5)));
  EXPECT_EQ(got.token(0, 0), 3u);
  EXPECT_TRUE(value_close(got.value(0, 0), 2.0 + n, logit_row(batch, 0)));
  EXPECT_TRUE(value_close(got.value(0, 1), 0.5 + n, logit_row(batch, 0)));
}

TEST_P(HandCase, NaNMakesEveryValueNaNButNeverEntersTheTop) {
  const std::uint32_t k = 3;
  const BatchData batch = build({.rows = {{1, kNaN, 2, 0, -1}, {1, kNaN, 2, 0, -1}},
                                 .tokens = {},
                                 .sampled_tokens = {4, 1},
                                 .logit_row_offsets = {0, 1, 2},
                                 .token_row_offsets = {0, 0, 0},
                                 .lp_output_offsets = {0, 1, 2}});
  const ResultData got = run(batch, k);
  for (std::uint64_t o = 0; o < 2; ++o) {
    EXPECT_EQ(sorted_top_tokens(got, o, k), (std::vector<std::uint32_t>{0, 2, 3}));
    for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(got.value(o, slot))) << "slot " << slot;
  }
  EXPECT_EQ(got.token(0, 3), 4u);
  EXPECT_EQ(got.token(1, 3), 1u) << "the evaluated token may be the NaN entry itself";
}

TEST_P(HandCase, NaNRowWithFewCandidatesIsPaddedWithNaN) {
  const std::uint32_t k = 3;
  const BatchData batch = single_row({kNaN, 1}, /*sampled=*/1);
  const ResultData got = run(batch, k);
  EXPECT_EQ(sorted_top_tokens(got, 0, k), (std::vector<std::uint32_t>{1, 2, 2}));
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(got.value(0, slot))) << "slot " << slot;
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, PlusInfEntersFirstAndMakesEveryValueNaN) {
  for (const std::uint32_t k : {3u, 7u}) {
    SCOPED_TRACE(::testing::Message() << "K = " << k);
    const BatchData batch = single_row({1, kInf, 2, 0, -kInf}, /*sampled=*/3);
    const ResultData got = run(batch, k);
    // K = 3: the three largest of +inf, 2, 1, 0; K = 7: all four candidates, 3 padding.
    const std::vector<std::uint32_t> want =
        k == 3 ? std::vector<std::uint32_t>{0, 1, 2} : std::vector<std::uint32_t>{0, 1, 2, 3, 5, 5, 5};
    EXPECT_EQ(sorted_top_tokens(got, 0, k), want);
    for (std::uint32_t slot = 0; slot < got.width; ++slot)
      EXPECT_TRUE(std::isnan(got.value(0, slot))) << "slot " << slot;
    EXPECT_EQ(got.token(0, got.width - 1), 3u);
    EXPECT_TRUE(judged_by_hand(batch, k, got));
  }
}

TEST_P(HandCase, OnlyMinusInfIsAllPaddingWithNaN) {
  const std::uint32_t k = 3;
  const BatchData batch = single_row({-kInf, -kInf, -kInf, -kInf}, /*sampled=*/1);
  const ResultData got = run(batch, k);
  EXPECT_EQ(sorted_top_tokens(got, 0, k), (std::vector<std::uint32_t>{4, 4, 4}));
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(got.value(0, slot))) << "slot " << slot;
  EXPECT_EQ(got.token(0, 3), 1u);
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

// ---- K and vocabulary extremes ----------------------------------------------------------------

TEST_P(HandCase, KZeroWritesOnlyTheEvaluatedToken) {
  const BatchData batch = build({.rows = {{0, 1, 2}, {5, -5, 0}},
                                 .tokens = {},
                                 .sampled_tokens = {1, 2},
                                 .logit_row_offsets = {0, 1, 2},
                                 .token_row_offsets = {0, 0, 0},
                                 .lp_output_offsets = {0, 1, 2}});
  const ResultData got = run(batch, /*k=*/0);
  ASSERT_EQ(got.width, 1u);
  ASSERT_EQ(got.rows, 2u);
  const double n0 = -(2.0 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0));
  const double n1 = -(5.0 + std::log(1.0 + std::exp(-10.0) + std::exp(-5.0)));
  EXPECT_EQ(got.token(0, 0), 1u);
  EXPECT_TRUE(value_close(got.value(0, 0), 1.0 + n0, logit_row(batch, 0)));
  EXPECT_EQ(got.token(1, 0), 2u);
  EXPECT_TRUE(value_close(got.value(1, 0), 0.0 + n1, logit_row(batch, 1)));
}

// K = 65535 with V above K: many ties at the cut (1009 distinct values), and masked entries.
// The row's maximum is 11.75, so the absolute tolerance is 1.2e-4. The max port's f32 sum of
// 70000 terms is off by 5.7e-5 here: this case checks the top-K selection at K = 65535, not
// the accuracy of long f32 sums, which the same row shifted to m = 1 would fail (see report).
TEST_P(HandCase, KOf65535WithVocabAboveK) {
  const std::uint32_t k = 65535;
  const std::uint32_t vocab = 70000;
  std::vector<float> x(vocab);
  for (std::uint32_t j = 0; j < vocab; ++j)
    x[j] = j % 97 == 5 ? -kInf : static_cast<float>((std::uint64_t{j} * 7919) % 1009) / 64.0f - 4.0f;
  const BatchData batch = single_row(x, /*sampled=*/12345);
  const ResultData got = run(batch, k);
  ASSERT_EQ(got.width, 65536u);
  std::uint64_t padding = 0;
  for (std::uint32_t slot = 0; slot < 65535; ++slot) padding += got.token(0, slot) == vocab;
  EXPECT_EQ(padding, 0u) << "69278 finite entries fill all 65535 slots";
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, KOf65535WithVocabBelowK) {
  const std::uint32_t k = 65535;
  const std::uint32_t vocab = 1000;
  std::vector<float> x(vocab);
  for (std::uint32_t j = 0; j < vocab; ++j) x[j] = static_cast<float>(j % 10) * 0.5f;
  const BatchData batch = single_row(x, /*sampled=*/999);
  const ResultData got = run(batch, k);
  std::vector<std::uint32_t> want;
  for (std::uint32_t t = 0; t < vocab; ++t) want.push_back(t);
  want.insert(want.end(), 65535 - vocab, vocab);
  EXPECT_EQ(sorted_top_tokens(got, 0, k), want) << "every token once, then 64535 padding slots";
  EXPECT_TRUE(judged_by_hand(batch, k, got));
}

TEST_P(HandCase, VocabOfOne) {
  const BatchData finite = single_row({0.25f}, /*sampled=*/0);
  const ResultData only_last = run(finite, 0);
  EXPECT_EQ(only_last.token(0, 0), 0u);
  EXPECT_EQ(only_last.value(0, 0), 0.0f) << "log 1";

  const ResultData with_top = run(finite, 3);
  EXPECT_EQ(sorted_top_tokens(with_top, 0, 3), (std::vector<std::uint32_t>{0, 1, 1}));
  const Slots top = sorted_top_slots(with_top, 0, 3);
  EXPECT_EQ(top[0].first, 0.0f);
  EXPECT_EQ(top[1].first, -kInf);
  EXPECT_EQ(with_top.token(0, 3), 0u);
  EXPECT_EQ(with_top.value(0, 3), 0.0f);

  const BatchData masked = single_row({-kInf}, /*sampled=*/0);
  const ResultData all_padding = run(masked, 3);
  EXPECT_EQ(sorted_top_tokens(all_padding, 0, 3), (std::vector<std::uint32_t>{1, 1, 1}));
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(all_padding.value(0, slot)));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, HandCase, ::testing::ValuesIn(registered_backends()), backend_test_name);

}  // namespace
}  // namespace logprobs::hand
