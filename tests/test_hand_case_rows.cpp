// SPEC §2 steps 1-4 by hand, against every registered backend: which logit row and which token
// each output row reads, over empty batches, echo and no-echo offsets, spare rows and tokens and
// row strides above V. Part of test_hand_cases (instantiated in test_hand_cases.cpp).
#include <cstdint>
#include <vector>

#include "hand_case_support.hpp"

namespace logprobs::hand {
namespace {

// (V <= 8 here: the one-chain summation term of the max port would add nothing to the tolerance.)
void expect_rows(const BatchData& batch, const ResultData& got, std::uint32_t k, const std::vector<Want>& want) {
  ASSERT_EQ(got.rows, want.size());
  EXPECT_TRUE(matches_by_hand(batch, k, got, want));
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
  const std::uint32_t k = 3;
  expect_rows(batch, run(batch, k), k, {{1, 3}, {2, 4}, {3, 2}, {4, 1}});
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
    EXPECT_EQ(run(batch, 3).rows, 0u) << "B = " << b_count;
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
  const std::uint32_t k = 1;
  // Batch 0: rows 2, 3 evaluating tokens[2] then sampled[0]; batch 1: row 5, sampled[1].
  expect_rows(batch, run(batch, k), k, {{2, 1}, {3, 0}, {5, 2}});
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
  const std::uint32_t k = 3;
  expect_rows(batch, run(batch, k), k, {{0, 1}, {1, 4}, {2, 2}, {3, 2}, {4, 3}, {5, 1}, {6, 5}, {7, 0}, {8, 4}});
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
  const std::uint32_t k = 7;
  expect_rows(batch, run(batch, k), k, {{0, 5}, {1, 0}, {2, 3}});
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
  const std::uint32_t k = 0;
  const ResultData got = run(batch, k);
  // Output rows 0, 1, 2: tokens[7 - 2] = 4, tokens[7 - 1] = 3, then sampled 1.
  EXPECT_EQ(got.token(0, 0), 4u);
  EXPECT_EQ(got.token(1, 0), 3u);
  EXPECT_EQ(got.token(2, 0), 1u);
  expect_rows(batch, got, k, {{0, 4}, {1, 3}, {2, 1}});
}

TEST_P(HandCase, RowStrideAboveVocabIgnoresTheGap) {
  const std::uint32_t k = 3;
  const BatchData batch = build({.rows = {{2, 0, -1, 3, 1}, {-kInf, 1, 1, 0, 2}},
                                 .tokens = {4},
                                 .sampled_tokens = {0},
                                 .logit_row_offsets = {0, 2},
                                 .token_row_offsets = {0, 1},
                                 .lp_output_offsets = {0, 2},
                                 .extra_stride = 7});
  ASSERT_EQ(batch.row_stride, 12u);
  const ResultData got = run(batch, k);
  const double n0 = -(3.0 + std::log(std::exp(-1.0) + std::exp(-3.0) + std::exp(-4.0) + 1.0 + std::exp(-2.0)));
  EXPECT_EQ(got.token(0, 3), 4u);
  EXPECT_TRUE(value_close(got.value(0, 3), 1.0 + n0, logit_row(batch, 0)));
  expect_rows(batch, got, k, {{0, 4}, {1, 0}});
}

}  // namespace
}  // namespace logprobs::hand
