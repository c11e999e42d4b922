// SPEC §2 and §3 row by row, against every registered backend. Expected values are computed
// here, in double, written out plainly; the reference backend is judged like any other.
// Top slots are compared as the contract allows: as multisets or sorted, never by position.
#include <cmath>
#include <cstdint>
#include <vector>

#include "hand_case_support.hpp"

namespace logprobs::hand {
namespace {

using HandCase = EveryBackend;
using Slots = std::vector<std::pair<float, std::uint32_t>>;

// ---- SPEC §2: the finite row ------------------------------------------------------------------

TEST_P(HandCase, FiniteRowHasSortedTopValuesAndEvaluatedToken) {
  const int levels = 2;  // K = 3, W = 4
  const BatchData batch = single_row({2, 0, -1, 3, 1}, /*sampled=*/2);
  const ResultData got = run(batch, levels);

  const double n = -(3.0 + std::log(std::exp(-1.0) + std::exp(-3.0) + std::exp(-4.0) + 1.0 + std::exp(-2.0)));
  const Slots top = sorted_top_slots(got, 0, levels);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].second, 3u);
  EXPECT_EQ(top[1].second, 0u);
  EXPECT_EQ(top[2].second, 4u);
  EXPECT_TRUE(value_close(top[0].first, 3.0 + n, 3.0));
  EXPECT_TRUE(value_close(top[1].first, 2.0 + n, 3.0));
  EXPECT_TRUE(value_close(top[2].first, 1.0 + n, 3.0));
  EXPECT_EQ(got.token(0, 3), 2u);
  EXPECT_TRUE(value_close(got.value(0, 3), -1.0 + n, 3.0));
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 2, levels));
}

TEST_P(HandCase, UniformRowGivesMinusLogV) {
  const int levels = 2;
  const BatchData batch = single_row({1, 1, 1, 1}, /*sampled=*/2);
  const ResultData got = run(batch, levels);
  const double log_quarter = -std::log(4.0);
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(value_close(got.value(0, slot), log_quarter, 1.0));
  const std::vector<std::uint32_t> tokens = sorted_top_tokens(got, 0, levels);
  EXPECT_TRUE(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end()) << "top tokens repeat";
  EXPECT_LT(tokens.back(), 4u);
  EXPECT_EQ(got.token(0, 3), 2u);
}

// SPEC §2.6: fewer candidates than K leaves (V, -inf + n) padding.
TEST_P(HandCase, VocabSmallerThanKIsPadded) {
  const int levels = 3;  // K = 7 > V = 3
  const BatchData batch = single_row({0.5f, -1, 2}, /*sampled=*/1);
  const ResultData got = run(batch, levels);

  const double n = -(2.0 + std::log(std::exp(-1.5) + std::exp(-3.0) + 1.0));
  const Slots top = sorted_top_slots(got, 0, levels);
  ASSERT_EQ(top.size(), 7u);
  EXPECT_EQ(top[0].second, 2u);
  EXPECT_EQ(top[1].second, 0u);
  EXPECT_EQ(top[2].second, 1u);
  EXPECT_TRUE(value_close(top[0].first, 2.0 + n, 2.0));
  EXPECT_TRUE(value_close(top[1].first, 0.5 + n, 2.0));
  EXPECT_TRUE(value_close(top[2].first, -1.0 + n, 2.0));
  for (int i = 3; i < 7; ++i) {
    EXPECT_EQ(top[i].second, 3u) << "padding token is V";
    EXPECT_EQ(top[i].first, -kInf) << "padding value is -inf + n";
  }
  EXPECT_EQ(got.token(0, 7), 1u);
  EXPECT_TRUE(value_close(got.value(0, 7), -1.0 + n, 2.0));
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 1, levels));
}

// SPEC §2.6: among equal logits at the K-th place any token may be kept.
TEST_P(HandCase, TieAtKthPlaceKeepsAnyOfTheTiedTokens) {
  const int levels = 2;  // K = 3: token 1 (3.0) and two of tokens 2, 3, 4 (2.0)
  const BatchData batch = single_row({1, 3, 2, 2, 2, 0}, /*sampled=*/5);
  const ResultData got = run(batch, levels);

  const std::set<std::vector<std::uint32_t>> accepted = {{1, 2, 3}, {1, 2, 4}, {1, 3, 4}};
  EXPECT_TRUE(accepted.contains(sorted_top_tokens(got, 0, levels)))
      << "top tokens " << ::testing::PrintToString(sorted_top_tokens(got, 0, levels));
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 5, levels));
}

TEST_P(HandCase, AllEqualRowKeepsAnyKDistinctTokens) {
  const int levels = 2;
  const BatchData batch = single_row({5, 5, 5, 5, 5, 5, 5, 5}, /*sampled=*/7);
  const ResultData got = run(batch, levels);
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(value_close(got.value(0, slot), -std::log(8.0), 5.0));
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 7, levels));
}

// ---- SPEC §3: special values ------------------------------------------------------------------

TEST_P(HandCase, MaskedMinusInfNeverEntersAndPadsWhenFewFinite) {
  const int levels = 3;  // K = 7, three finite entries
  const BatchData batch = single_row({-kInf, 1, -kInf, 2, 0.5f, -kInf}, /*sampled=*/0);
  const ResultData got = run(batch, levels);

  const double n = -(2.0 + std::log(std::exp(-1.0) + 1.0 + std::exp(-1.5)));
  const Slots top = sorted_top_slots(got, 0, levels);
  EXPECT_EQ(top[0].second, 3u);
  EXPECT_EQ(top[1].second, 1u);
  EXPECT_EQ(top[2].second, 4u);
  EXPECT_TRUE(value_close(top[0].first, 2.0 + n, 2.0));
  EXPECT_TRUE(value_close(top[1].first, 1.0 + n, 2.0));
  EXPECT_TRUE(value_close(top[2].first, 0.5 + n, 2.0));
  for (int i = 3; i < 7; ++i) {
    EXPECT_EQ(top[i].second, 6u);
    EXPECT_EQ(top[i].first, -kInf);
  }
  EXPECT_EQ(got.token(0, 7), 0u);
  EXPECT_EQ(got.value(0, 7), -kInf) << "the evaluated token is masked";
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 0, levels));
}

TEST_P(HandCase, MaskedMinusInfWithMoreFiniteThanK) {
  const int levels = 1;  // K = 1
  const BatchData batch = single_row({-kInf, 1, -kInf, 2, 0.5f}, /*sampled=*/4);
  const ResultData got = run(batch, levels);
  const double n = -(2.0 + std::log(std::exp(-1.0) + 1.0 + std::exp(-1.5)));
  EXPECT_EQ(got.token(0, 0), 3u);
  EXPECT_TRUE(value_close(got.value(0, 0), 2.0 + n, 2.0));
  EXPECT_TRUE(value_close(got.value(0, 1), 0.5 + n, 2.0));
}

TEST_P(HandCase, NaNMakesEveryValueNaNButNeverEntersTheTop) {
  const int levels = 2;
  const BatchData batch = build({.rows = {{1, kNaN, 2, 0, -1}, {1, kNaN, 2, 0, -1}},
                                 .tokens = {},
                                 .sampled_tokens = {4, 1},
                                 .logit_row_offsets = {0, 1, 2},
                                 .token_row_offsets = {0, 0, 0},
                                 .lp_output_offsets = {0, 1, 2}});
  const ResultData got = run(batch, levels);
  for (std::uint64_t o = 0; o < 2; ++o) {
    EXPECT_EQ(sorted_top_tokens(got, o, levels), (std::vector<std::uint32_t>{0, 2, 3}));
    for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(got.value(o, slot))) << "slot " << slot;
    EXPECT_TRUE(row_matches(got, o, logit_row(batch, o), batch.sampled_tokens[o], levels));
  }
  EXPECT_EQ(got.token(0, 3), 4u);
  EXPECT_EQ(got.token(1, 3), 1u) << "the evaluated token may be the NaN entry itself";
}

TEST_P(HandCase, NaNRowWithFewCandidatesIsPaddedWithNaN) {
  const int levels = 2;
  const BatchData batch = single_row({kNaN, 1}, /*sampled=*/1);
  const ResultData got = run(batch, levels);
  EXPECT_EQ(sorted_top_tokens(got, 0, levels), (std::vector<std::uint32_t>{1, 2, 2}));
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(got.value(0, slot))) << "slot " << slot;
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 1, levels));
}

TEST_P(HandCase, PlusInfEntersFirstAndMakesEveryValueNaN) {
  for (const int levels : {2, 3}) {
    SCOPED_TRACE(::testing::Message() << "levels " << levels);
    const BatchData batch = single_row({1, kInf, 2, 0, -kInf}, /*sampled=*/3);
    const ResultData got = run(batch, levels);
    // levels 2: the three largest of +inf, 2, 1, 0; levels 3: all four candidates, 3 padding.
    const std::vector<std::uint32_t> want =
        levels == 2 ? std::vector<std::uint32_t>{0, 1, 2} : std::vector<std::uint32_t>{0, 1, 2, 3, 5, 5, 5};
    EXPECT_EQ(sorted_top_tokens(got, 0, levels), want);
    for (std::uint32_t slot = 0; slot < got.width; ++slot)
      EXPECT_TRUE(std::isnan(got.value(0, slot))) << "slot " << slot;
    EXPECT_EQ(got.token(0, got.width - 1), 3u);
    EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 3, levels));
  }
}

TEST_P(HandCase, OnlyMinusInfIsAllPaddingWithNaN) {
  const int levels = 2;
  const BatchData batch = single_row({-kInf, -kInf, -kInf, -kInf}, /*sampled=*/1);
  const ResultData got = run(batch, levels);
  EXPECT_EQ(sorted_top_tokens(got, 0, levels), (std::vector<std::uint32_t>{4, 4, 4}));
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(got.value(0, slot))) << "slot " << slot;
  EXPECT_EQ(got.token(0, 3), 1u);
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 1, levels));
}

// ---- levels and vocabulary extremes -----------------------------------------------------------

TEST_P(HandCase, LevelsZeroWritesOnlyTheEvaluatedToken) {
  const BatchData batch = build({.rows = {{0, 1, 2}, {5, -5, 0}},
                                 .tokens = {},
                                 .sampled_tokens = {1, 2},
                                 .logit_row_offsets = {0, 1, 2},
                                 .token_row_offsets = {0, 0, 0},
                                 .lp_output_offsets = {0, 1, 2}});
  const ResultData got = run(batch, /*levels=*/0);
  ASSERT_EQ(got.width, 1u);
  ASSERT_EQ(got.rows, 2u);
  const double n0 = -(2.0 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0));
  const double n1 = -(5.0 + std::log(1.0 + std::exp(-10.0) + std::exp(-5.0)));
  EXPECT_EQ(got.token(0, 0), 1u);
  EXPECT_TRUE(value_close(got.value(0, 0), 1.0 + n0, 2.0));
  EXPECT_EQ(got.token(1, 0), 2u);
  EXPECT_TRUE(value_close(got.value(1, 0), 0.0 + n1, 5.0));
}

// K = 65535 with V above K: many ties at the cut (1009 distinct values), and masked entries.
// The row's maximum is 11.75, so the absolute tolerance is 1.2e-4. The max port's f32 sum of
// 70000 terms is off by 5.7e-5 here: this case checks the top-K selection at levels 16, not
// the accuracy of long f32 sums, which the same row shifted to m = 1 would fail (see report).
TEST_P(HandCase, LevelsSixteenWithVocabAboveK) {
  const int levels = 16;
  const std::uint32_t vocab = 70000;
  std::vector<float> x(vocab);
  for (std::uint32_t j = 0; j < vocab; ++j)
    x[j] = j % 97 == 5 ? -kInf : static_cast<float>((std::uint64_t{j} * 7919) % 1009) / 64.0f - 4.0f;
  const BatchData batch = single_row(x, /*sampled=*/12345);
  const ResultData got = run(batch, levels);
  ASSERT_EQ(got.width, 65536u);
  std::uint64_t padding = 0;
  for (std::uint32_t slot = 0; slot < 65535; ++slot) padding += got.token(0, slot) == vocab;
  EXPECT_EQ(padding, 0u) << "69278 finite entries fill all 65535 slots";
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 12345, levels));
}

TEST_P(HandCase, LevelsSixteenWithVocabBelowK) {
  const int levels = 16;
  const std::uint32_t vocab = 1000;
  std::vector<float> x(vocab);
  for (std::uint32_t j = 0; j < vocab; ++j) x[j] = static_cast<float>(j % 10) * 0.5f;
  const BatchData batch = single_row(x, /*sampled=*/999);
  const ResultData got = run(batch, levels);
  std::vector<std::uint32_t> want;
  for (std::uint32_t t = 0; t < vocab; ++t) want.push_back(t);
  want.insert(want.end(), 65535 - vocab, vocab);
  EXPECT_EQ(sorted_top_tokens(got, 0, levels), want) << "every token once, then 64535 padding slots";
  EXPECT_TRUE(row_matches(got, 0, logit_row(batch, 0), 999, levels));
}

TEST_P(HandCase, VocabOfOne) {
  const BatchData finite = single_row({0.25f}, /*sampled=*/0);
  const ResultData only_last = run(finite, 0);
  EXPECT_EQ(only_last.token(0, 0), 0u);
  EXPECT_EQ(only_last.value(0, 0), 0.0f) << "log 1";

  const ResultData with_top = run(finite, 2);
  EXPECT_EQ(sorted_top_tokens(with_top, 0, 2), (std::vector<std::uint32_t>{0, 1, 1}));
  const Slots top = sorted_top_slots(with_top, 0, 2);
  EXPECT_EQ(top[0].first, 0.0f);
  EXPECT_EQ(top[1].first, -kInf);
  EXPECT_EQ(with_top.token(0, 3), 0u);
  EXPECT_EQ(with_top.value(0, 3), 0.0f);

  const BatchData masked = single_row({-kInf}, /*sampled=*/0);
  const ResultData all_padding = run(masked, 2);
  EXPECT_EQ(sorted_top_tokens(all_padding, 0, 2), (std::vector<std::uint32_t>{1, 1, 1}));
  for (std::uint32_t slot = 0; slot < 4; ++slot) EXPECT_TRUE(std::isnan(all_padding.value(0, slot)));
}

// ---- SPEC §2 steps 1-4: which logit row and token each output row reads --------------------

// Output row o should read logit row `logit_row` and evaluate `token`; worked out by hand.
struct Want {
  std::uint64_t logit_row;
  std::uint32_t token;
};

void expect_rows(const BatchData& batch, const ResultData& got, int levels, const std::vector<Want>& want) {
  ASSERT_EQ(got.rows, want.size());
  for (std::uint64_t o = 0; o < want.size(); ++o) {
    SCOPED_TRACE(::testing::Message() << "output row " << o);
    EXPECT_TRUE(row_matches(got, o, logit_row(batch, want[o].logit_row), want[o].token, levels));
  }
}

// Distinct rows, so reading the wrong one shows: row i is i, i+1, ... shifted and scaled.
std::vector<std::vector<float>> distinct_rows(std::uint64_t count, std::uint64_t vocab) {
  std::vector<std::vector<float>> rows(count, std::vector<float>(vocab));
  for (std::uint64_t i = 0; i < count; ++i)
    for (std::uint64_t j = 0; j < vocab; ++j) rows[i][j] = static_cast<float>((i * 3 + j * 5) % 7) * (1.0f + i) / 4;
  return rows;
}

// Rows that no output row should read hold NaN, so reading one shows as NaN everywhere.
std::vector<float> unread_row(std::uint64_t vocab) { return std::vector<float>(vocab, kNaN); }

TEST_P(HandCase, EmptyBatchesBetweenNonEmptyOnes) {
  const std::uint64_t vocab = 5;
  std::vector<std::vector<float>> rows = distinct_rows(6, vocab);
  rows[0] = unread_row(vocab);  // batch 0's (empty)
  rows[5] = unread_row(vocab);  // batch 4's (empty)
  // Empty batches 0, 2, 4 own tokens (and unread sampled tokens) >= V, which must not be read.
  const BatchData batch = build({.rows = rows,
                                 .tokens = {99, 98, 3, 97, 96, 2, 95, 94},
                                 .sampled_tokens = {99, 4, 77, 1, 55},
                                 .logit_row_offsets = {0, 1, 3, 3, 5, 6},
                                 .token_row_offsets = {0, 2, 3, 5, 6, 8},
                                 .lp_output_offsets = {0, 0, 2, 2, 4, 4}});
  const int levels = 2;
  expect_rows(batch, run(batch, levels), levels, {{1, 3}, {2, 4}, {3, 2}, {4, 1}});
}

TEST_P(HandCase, OnlyEmptyBatchesGiveNoRows) {
  for (const auto& loo : {std::vector<std::uint32_t>{0}, std::vector<std::uint32_t>{0, 0, 0}}) {
    const std::uint64_t b_count = loo.size() - 1;
    const BatchData batch = build({.rows = {unread_row(3)},
                                   .tokens = {},
                                   .sampled_tokens = std::vector<std::uint32_t>(b_count, 7),
                                   .logit_row_offsets = std::vector<std::uint32_t>(b_count + 1, 0),
                                   .token_row_offsets = std::vector<std::uint32_t>(b_count + 1, 0),
                                   .lp_output_offsets = loo});
    EXPECT_EQ(run(batch, 2).rows, 0u) << "B = " << b_count;
  }
}

TEST_P(HandCase, FewerOutputRowsThanLogitRowsReadsTheLastRows) {
  const std::uint64_t vocab = 4;
  std::vector<std::vector<float>> rows = distinct_rows(6, vocab);
  rows[0] = unread_row(vocab);
  rows[1] = unread_row(vocab);
  rows[4] = unread_row(vocab);
  const BatchData batch = build({.rows = rows,
                                 .tokens = {3, 2, 1},
                                 .sampled_tokens = {0, 2},
                                 .logit_row_offsets = {0, 4, 6},
                                 .token_row_offsets = {0, 3, 3},
                                 .lp_output_offsets = {0, 2, 3}});
  const int levels = 1;
  // Batch 0: rows 2, 3 evaluating tokens[2] then sampled[0]; batch 1: row 5, sampled[1].
  expect_rows(batch, run(batch, levels), levels, {{2, 1}, {3, 0}, {5, 2}});
}

// Echo: lro = tro = loo. Output row o reads logit row o and evaluates the next token, tokens[o + 1],
// or the sampled token on a batch's last row.
TEST_P(HandCase, EchoOffsetShape) {
  const std::uint64_t vocab = 6;
  const std::vector<std::uint32_t> offsets = {0, 3, 5, 9};
  const BatchData batch = build({.rows = distinct_rows(9, vocab),
                                 .tokens = {5, 1, 4, 0, 2, 3, 1, 5, 0},
                                 .sampled_tokens = {2, 3, 4},
                                 .logit_row_offsets = offsets,
                                 .token_row_offsets = offsets,
                                 .lp_output_offsets = offsets,
                                 .extra_stride = 2});
  const int levels = 2;
  expect_rows(batch, run(batch, levels), levels,
              {{0, 1}, {1, 4}, {2, 2}, {3, 2}, {4, 3}, {5, 1}, {6, 5}, {7, 0}, {8, 4}});
}

// No echo: one logit row and one output row per batch item, each evaluating its sampled token;
// the prompts' tokens (some >= V) are never read.
TEST_P(HandCase, NoEchoOffsetShape) {
  const std::uint64_t vocab = 6;
  const BatchData batch = build({.rows = distinct_rows(3, vocab),
                                 .tokens = {100, 1, 2, 3, 200, 300, 5},
                                 .sampled_tokens = {5, 0, 3},
                                 .logit_row_offsets = {0, 1, 2, 3},
                                 .token_row_offsets = {0, 4, 4, 7},
                                 .lp_output_offsets = {0, 1, 2, 3}});
  const int levels = 3;
  expect_rows(batch, run(batch, levels), levels, {{0, 5}, {1, 0}, {2, 3}});
}

// SPEC §2.4: row r before a batch's last evaluates tokens[tro[b+1] - r], counted from the end
// of the batch's tokens, not its start.
TEST_P(HandCase, EvaluatedTokenCountsFromTheEndOfTheBatchsTokens) {
  const std::uint64_t vocab = 8;
  // One row per token value: x_j = j except x_j = 10 at j = i + 1, so each token's value differs.
  std::vector<std::vector<float>> rows(3, std::vector<float>(vocab));
  for (std::uint64_t i = 0; i < 3; ++i)
    for (std::uint64_t j = 0; j < vocab; ++j) rows[i][j] = j == i + 1 ? 10.0f : static_cast<float>(j) / 2;
  const BatchData batch = build({.rows = rows,
                                 .tokens = {200, 201, 7, 6, 5, 4, 3},
                                 .sampled_tokens = {1},
                                 .logit_row_offsets = {0, 3},
                                 .token_row_offsets = {2, 7},
                                 .lp_output_offsets = {0, 3}});
  const int levels = 0;
  const ResultData got = run(batch, levels);
  // Output rows 0, 1, 2: tokens[7 - 2] = 4, tokens[7 - 1] = 3, then sampled 1.
  EXPECT_EQ(got.token(0, 0), 4u);
  EXPECT_EQ(got.token(1, 0), 3u);
  EXPECT_EQ(got.token(2, 0), 1u);
  expect_rows(batch, got, levels, {{0, 4}, {1, 3}, {2, 1}});
}

TEST_P(HandCase, RowStrideAboveVocabIgnoresTheGap) {
  const int levels = 2;
  const BatchData batch = build({.rows = {{2, 0, -1, 3, 1}, {-kInf, 1, 1, 0, 2}},
                                 .tokens = {4},
                                 .sampled_tokens = {0},
                                 .logit_row_offsets = {0, 2},
                                 .token_row_offsets = {0, 1},
                                 .lp_output_offsets = {0, 2},
                                 .extra_stride = 7});
  ASSERT_EQ(batch.row_stride, 12u);
  const ResultData got = run(batch, levels);
  const double n0 = -(3.0 + std::log(std::exp(-1.0) + std::exp(-3.0) + std::exp(-4.0) + 1.0 + std::exp(-2.0)));
  EXPECT_EQ(got.token(0, 3), 4u);
  EXPECT_TRUE(value_close(got.value(0, 3), 1.0 + n0, 3.0));
  expect_rows(batch, got, levels, {{0, 4}, {1, 0}});
}

INSTANTIATE_TEST_SUITE_P(AllBackends, HandCase, ::testing::ValuesIn(registered_backends()), backend_test_name);

// ---- the judge itself: it must reject what the contract rejects ------------------------------

// A hand-made result for the tie row {1, 3, 2, 2, 2, 0} at levels 2, sampled token 5.
struct TieRow {
  std::vector<float> x = {1, 3, 2, 2, 2, 0};
  double n = -(3.0 + std::log(std::exp(-2.0) + 1.0 + 3 * std::exp(-1.0) + std::exp(-3.0)));
  ResultData result{1, 4};
  void set(std::uint32_t slot, std::uint32_t token, double value) {
    result.lp_tokens[slot] = token;
    result.lp_logits[slot] = static_cast<float>(value);
  }
  TieRow(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
    for (std::uint32_t slot = 0; slot < 3; ++slot) {
      const std::uint32_t t = slot == 0 ? a : slot == 1 ? b : c;
      set(slot, t, t < x.size() ? x[t] + n : -double(kInf));
    }
    set(3, 5, x[5] + n);
  }
  ::testing::AssertionResult judged() const { return row_matches(result, 0, x, 5, 2); }
};

TEST(RowMatches, AcceptsAnyTieBreakAndAnySlotOrder) {
  EXPECT_TRUE(TieRow(1, 2, 3).judged());
  EXPECT_TRUE(TieRow(4, 1, 3).judged());
  EXPECT_TRUE(TieRow(2, 4, 1).judged());
}

TEST(RowMatches, RejectsWrongTokensPaddingAndValues) {
  EXPECT_FALSE(TieRow(1, 2, 0).judged()) << "token 0 (logit 1) is not among the top 3";
  EXPECT_FALSE(TieRow(2, 3, 4).judged()) << "token 1 (the maximum) is missing";
  EXPECT_FALSE(TieRow(1, 2, 2).judged()) << "a repeated token";
  EXPECT_FALSE(TieRow(1, 2, 6).judged()) << "padding where a candidate exists";
  EXPECT_FALSE(TieRow(1, 2, 7).judged()) << "a token above V";

  TieRow off_value(1, 2, 3);
  off_value.set(1, 2, 2.0 + off_value.n + 1e-3);
  EXPECT_FALSE(off_value.judged());

  TieRow wrong_last(1, 2, 3);
  wrong_last.set(3, 0, 1.0 + wrong_last.n);
  EXPECT_FALSE(wrong_last.judged());

  TieRow nan_value(1, 2, 3);
  nan_value.set(0, 1, std::nan(""));
  EXPECT_FALSE(nan_value.judged());
}

TEST(ValueClose, FollowsTheSpecTolerance) {
  EXPECT_TRUE(value_close(kNaN, std::nan(""), 1));
  EXPECT_FALSE(value_close(0.0f, std::nan(""), 1));
  EXPECT_TRUE(value_close(-kInf, -double(kInf), 1));
  EXPECT_FALSE(value_close(kInf, -double(kInf), 1));
  EXPECT_FALSE(value_close(-3.0f, -double(kInf), 1));
  EXPECT_TRUE(value_close(-1.0f + 9e-6f, -1.0, 1));
  EXPECT_FALSE(value_close(-1.0f + 2e-5f, -1.0, 1));
  EXPECT_TRUE(value_close(-1.0f + 2e-5f, -1.0, 10)) << "atol scales with max(1, |m|)";
}

}  // namespace
}  // namespace logprobs::hand
