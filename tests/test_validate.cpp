// SPEC §4, one test per rule: each breaks one rule of an otherwise valid batch and checks that
// InvalidBatch names the field, the batch index and the values, and that Backend::run throws
// without calling compute().
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "validation_support.hpp"

namespace logprobs::validation {
namespace {

TEST(Validate, TheBaseBatchIsValid) {
  EXPECT_TRUE(accepted(valid_batch(), kK));
  const OutputShape shape = validate_batch(valid_batch().view(), kK);
  EXPECT_EQ(shape.rows, 5u);
  EXPECT_EQ(shape.width, 4u);
}

// ---- V, K, row stride, dtype ------------------------------------------------------------------

TEST(Validate, RejectsVocabZero) {
  BatchData batch = valid_batch();
  batch.vocab = 0;
  EXPECT_TRUE(rejected(batch, kK, {"vocab", "got 0"}));
}

TEST(Validate, RejectsVocabAboveU32) {
  BatchData batch = valid_batch();
  batch.vocab = batch.row_stride = std::uint64_t{1} << 32;
  batch.rows = 0;  // no logits are needed to reject it
  batch.logit_row_offsets = {0, 0, 0, 0};
  batch.lp_output_offsets = {0, 0, 0, 0};
  EXPECT_TRUE(rejected(batch, kK, {"vocab", "4294967296", "4294967295", "padding token"}));
}

TEST(Validate, AcceptsVocabOfU32Max) {
  BatchData batch = valid_batch();
  batch.vocab = batch.row_stride = kU32Max;
  EXPECT_TRUE(accepted(batch, kK)) << "V = 2^32 - 1 still fits the padding token";
}

TEST(Validate, RejectsKAbove65535) {
  EXPECT_TRUE(rejected(valid_batch(), 65536, {"k", "65536", "exceeds 65535", "levels 0..16"}));
  EXPECT_TRUE(accepted(valid_batch(), 0));
  EXPECT_TRUE(accepted(valid_batch(), 5));
  EXPECT_TRUE(accepted(valid_batch(), 65535));
}

TEST(Validate, RejectsRowStrideBelowVocab) {
  BatchData batch = valid_batch();
  batch.row_stride = 3;
  EXPECT_TRUE(rejected(batch, kK, {"row_stride", "3", "vocab 4"}));
}

TEST(Validate, RejectsRowsTimesStrideOverflowing64Bits) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.row_stride = std::uint64_t{1} << 62;
  EXPECT_TRUE(rejected(batch, kK, {"logits", "7 * 4611686018427387904", "overflows the address space"}));
}

// 7 * 2^60 floats fit 64 bits as a count but not as a byte offset.
TEST(Validate, RejectsRowsTimesStrideOverflowingBytes) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.row_stride = std::uint64_t{1} << 60;
  EXPECT_TRUE(rejected(batch, kK, {"logits", "7 * 1152921504606846976", "overflows the address space"}));
}

// A 16-bit element is 2 bytes: 7 * 2^59 of them fit a byte offset where 4-byte floats would not.
TEST(Validate, TheByteOffsetLimitCountsTheDtypesSize) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.row_stride = std::uint64_t{1} << 59;
  EXPECT_TRUE(rejected(batch, kK, {"logits", "7 * 576460752303423488", "elements of 4 bytes"}));
  batch.dtype = LogitsDtype::bf16;
  EXPECT_TRUE(accepted(batch, kK));
}

TEST(Validate, RejectsAnUnknownDtype) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.dtype = static_cast<LogitsDtype>(7);
  EXPECT_TRUE(rejected(batch, kK, {"logits", "unknown dtype", "7"}));
}

TEST(Validate, RejectsNullLogitsWithRows) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.logits = nullptr;
  EXPECT_TRUE(rejected(batch, kK, {"logits", "null", "7 rows"}));
}

// ---- lengths of the offset arrays and sampled_tokens -------------------------------------------

TEST(Validate, RejectsLogitRowOffsetsOfWrongLength) {
  BatchData batch = valid_batch();
  batch.logit_row_offsets.push_back(7);
  EXPECT_TRUE(rejected(batch, kK, {"logit_row_offsets", "length 5", "3 entries", "B + 1 = 4"}));
}

TEST(Validate, RejectsTokenRowOffsetsOfWrongLength) {
  BatchData batch = valid_batch();
  batch.token_row_offsets.pop_back();
  EXPECT_TRUE(rejected(batch, kK, {"token_row_offsets", "length 3", "3 entries", "B + 1 = 4"}));
}

TEST(Validate, RejectsLpOutputOffsetsOfWrongLength) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets.push_back(5);
  EXPECT_TRUE(rejected(batch, kK, {"lp_output_offsets", "length 5", "3 entries", "B + 1 = 4"}));
}

TEST(Validate, RejectsEmptyOffsetArrays) {
  BatchData batch = valid_batch();
  batch.sampled_tokens.clear();
  batch.logit_row_offsets.clear();
  batch.token_row_offsets.clear();
  batch.lp_output_offsets.clear();
  EXPECT_TRUE(rejected(batch, kK, {"logit_row_offsets", "length 0", "B + 1 = 1"}));
}

TEST(Validate, RejectsSampledTokensOfWrongLength) {
  BatchData batch = valid_batch();
  batch.sampled_tokens.pop_back();
  EXPECT_TRUE(rejected(batch, kK, {"sampled_tokens", "length 2", "offset arrays have length 4", "B = 3"}));
}

TEST(Validate, RejectsTemperaturesOfWrongLength) {
  BatchData batch = valid_batch();
  batch.temperatures = std::vector<float>{1.0f, 0.5f};
  EXPECT_TRUE(rejected(batch, kK, {"temperatures", "length 2", "3 entries", "one temperature per batch item"}));
  batch.temperatures = std::vector<float>{};  // given, but empty: not the same as no temperatures
  EXPECT_TRUE(rejected(batch, kK, {"temperatures", "length 0", "3 entries"}));
}

// ---- monotone offsets, loo[0] = 0 -------------------------------------------------------------

TEST(Validate, RejectsDecreasingLogitRowOffsets) {
  BatchData batch = valid_batch();
  batch.logit_row_offsets = {0, 3, 2, 7};
  EXPECT_TRUE(rejected(batch, kK, {"batch 1", "logit_row_offsets", "[1..2] = 3..2"}));
}

TEST(Validate, RejectsDecreasingTokenRowOffsets) {
  BatchData batch = valid_batch();
  batch.token_row_offsets = {0, 2, 1, 6};
  EXPECT_TRUE(rejected(batch, kK, {"batch 1", "token_row_offsets", "[1..2] = 2..1"}));
}

TEST(Validate, RejectsDecreasingLpOutputOffsets) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets = {0, 3, 2, 5};
  EXPECT_TRUE(rejected(batch, kK, {"batch 1", "lp_output_offsets", "[1..2] = 3..2"}));
}

TEST(Validate, RejectsOutputOffsetsNotStartingAtZero) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets = {1, 3, 3, 5};
  EXPECT_TRUE(rejected(batch, kK, {"lp_output_offsets[0]", "got 1"}));
}

// ---- totals against the arrays ----------------------------------------------------------------

TEST(Validate, RejectsLogitOffsetsPastTheRows) {
  BatchData batch = valid_batch();
  batch.rows = 6;
  EXPECT_TRUE(rejected(batch, kK, {"logit_row_offsets[3] = 7", "6 logit rows"}));
}

TEST(Validate, RejectsTokenOffsetsPastTheTokens) {
  BatchData batch = valid_batch();
  batch.tokens.pop_back();
  EXPECT_TRUE(rejected(batch, kK, {"token_row_offsets[3] = 6", "5 tokens"}));
}

// ---- per batch: enough logit rows and tokens --------------------------------------------------

TEST(Validate, RejectsMoreOutputRowsThanLogitRows) {
  BatchData batch = valid_batch();
  batch.logit_row_offsets = {0, 3, 5, 7};
  batch.lp_output_offsets = {0, 3, 3, 6};
  EXPECT_TRUE(rejected(batch, kK, {"batch 2", "3 output rows", "only 2 logit rows", "logit_row_offsets[2..3] = 5..7"}));
}

TEST(Validate, AcceptsAsManyOutputRowsAsLogitRows) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets = {0, 3, 3, 6};  // batch 2: 3 logit rows, 3 output rows, 2 tokens
  EXPECT_TRUE(accepted(batch, kK));
}

TEST(Validate, RejectsTooFewTokens) {
  BatchData batch = valid_batch();
  batch.token_row_offsets = {0, 2, 5, 6};
  batch.lp_output_offsets = {0, 3, 3, 6};
  EXPECT_TRUE(rejected(
      batch, kK, {"batch 2", "3 output rows", "only 1 tokens", "token_row_offsets[2..3] = 5..6", "read 2 tokens"}));
}

TEST(Validate, AcceptsOneTokenFewerThanOutputRows) {
  BatchData batch = valid_batch();
  batch.token_row_offsets = {0, 2, 5, 6};  // batch 2: 1 token, 2 output rows
  EXPECT_TRUE(accepted(batch, kK));
}

// ---- tokens the kernel reads --------------------------------------------------------------------

TEST(Validate, RejectsSampledTokenNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[2] = 4;
  EXPECT_TRUE(rejected(batch, kK, {"batch 2", "sampled_tokens[2] = 4", "vocab 4"}));
}

TEST(Validate, RejectsReadTokenNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.tokens[5] = 9;
  EXPECT_TRUE(rejected(batch, kK, {"batch 2", "tokens[5] = 9", "output row 3", "vocab 4"}));
  batch = valid_batch();
  batch.tokens[0] = kU32Max;
  EXPECT_TRUE(rejected(batch, kK, {"batch 0", "tokens[0] = 4294967295", "output row 0"}));
}

TEST(Validate, AcceptsUnreadTokensNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.tokens[2] = kU32Max;  // batch 1 has no output rows
  batch.tokens[3] = 4;
  batch.tokens[4] = 1000;  // batch 2 reads only its last token
  EXPECT_TRUE(accepted(batch, kK));
}

TEST(Validate, AcceptsEmptyBatchsSampledTokenNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[1] = kU32Max;
  EXPECT_TRUE(accepted(batch, kK));
}

// ---- temperatures ------------------------------------------------------------------------------

TEST(Validate, RejectsATemperatureNotFiniteOrNotAbove0) {
  for (const float bad :
       {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    BatchData batch = valid_batch();
    batch.temperatures = std::vector<float>{1.0f, 2.0f, 0.5f};
    (*batch.temperatures)[1] = bad;  // batch 1 has no output rows: every temperature is checked
    EXPECT_TRUE(rejected(batch, kK, {"batch 1", "temperatures[1] = ", "not a finite number above 0"})) << bad;
  }
  BatchData batch = valid_batch();
  batch.temperatures = std::vector<float>{1e-30f, 1.0f, 3e38f};
  EXPECT_TRUE(accepted(batch, kK));
}

// ---- outputs ----------------------------------------------------------------------------------

TEST(Validate, RejectsOutputsOfWrongShape) {
  const BatchData batch = valid_batch();
  EXPECT_TRUE(rejected(batch.view(), kK, ResultData(4, 4), {"outputs", "shape [4, 4]", "[N, W] = [5, 4]"}));
  EXPECT_TRUE(rejected(batch.view(), kK, ResultData(5, 8), {"outputs", "shape [5, 8]", "[N, W] = [5, 4]"}));
  EXPECT_TRUE(rejected(batch.view(), 0, ResultData(5, 4), {"outputs", "shape [5, 4]", "[N, W] = [5, 1]"}));
}

TEST(Validate, RejectsOutputSpansOfWrongSize) {
  const BatchData batch = valid_batch();
  ResultData short_logits(5, 4);
  short_logits.lp_logits.resize(19);
  EXPECT_TRUE(rejected(batch.view(), kK, short_logits, {"lp_logits", "19 elements", "[5, 4]", "needs 20"}));
  ResultData long_tokens(5, 4);
  long_tokens.lp_tokens.resize(21);
  EXPECT_TRUE(rejected(batch.view(), kK, long_tokens, {"lp_tokens", "21 elements", "[5, 4]", "needs 20"}));
}

TEST(Validate, RejectsRanksOfWrongShape) {
  const BatchData batch = valid_batch();
  ResultData short_ranks(5, 4, /*ranks=*/true);
  short_ranks.lp_ranks.resize(4);
  EXPECT_TRUE(rejected(batch.view(), kK, short_ranks, {"lp_ranks", "4 elements", "[N] = [5]"}));
  ResultData unasked(5, 4);
  unasked.lp_ranks.resize(5);
  EXPECT_TRUE(rejected(batch.view(), kK, unasked, {"lp_ranks", "5 elements", "not asked for"}));
}

}  // namespace
}  // namespace logprobs::validation
