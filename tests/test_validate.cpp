// SPEC §4, one test per rule: each breaks one rule of an otherwise valid batch and checks that
// InvalidBatch names the field, the batch index and the values, and that Backend::run throws
// without calling compute().
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "harness/batch_data.hpp"

namespace logprobs {
namespace {

constexpr std::uint32_t kU32Max = std::numeric_limits<std::uint32_t>::max();
constexpr int kLevels = 2;  // W = 4

// V = 4, 7 logit rows, B = 3:
//   batch 0: logit rows [0, 3), tokens [0, 2), 3 output rows: reads tokens[0], tokens[1], sampled[0]
//   batch 1: logit row  [3, 4), tokens [2, 4), no output rows: reads nothing
//   batch 2: logit rows [4, 7), tokens [4, 6), 2 output rows: reads tokens[5], sampled[2]
// so N = 5, and tokens[2], tokens[3], tokens[4] and sampled[1] are never read.
BatchData valid_batch() {
  BatchData batch;
  batch.rows = 7;
  batch.vocab = 4;
  batch.row_stride = 4;
  batch.logits.assign(batch.rows * batch.row_stride, 0.5f);
  batch.tokens = {1, 2, 3, 0, 3, 2};
  batch.sampled_tokens = {0, 3, 1};
  batch.logit_row_offsets = {0, 3, 4, 7};
  batch.token_row_offsets = {0, 2, 4, 6};
  batch.lp_output_offsets = {0, 3, 3, 5};
  return batch;
}

// A backend that only records whether compute() ran.
class SpyBackend final : public Backend {
 public:
  std::string_view name() const override { return "spy"; }
  std::string_view description() const override { return "records compute() calls"; }
  mutable int compute_calls = 0;

 protected:
  void compute(const RaggedBatch&, int, const LogprobsOutput&) const override { ++compute_calls; }
};

// Outputs of the shape the batch asks for (levels clamped, so that a bad levels is the only fault).
ResultData outputs_for(const RaggedBatch& batch, int levels) {
  return ResultData(batch.output_rows(), slots_per_row(std::clamp(levels, 0, kMaxLevels)));
}

// validate_batch throws InvalidBatch whose message holds every part; Backend::run throws it too
// and never calls compute().
::testing::AssertionResult rejected(const RaggedBatch& batch, int levels, ResultData out,
                                    std::initializer_list<std::string_view> parts) {
  std::string message;
  try {
    validate_batch(batch, levels, out.view());
    return ::testing::AssertionFailure() << "validate_batch accepted the batch";
  } catch (const InvalidBatch& e) {
    message = e.what();
  }
  for (std::string_view part : parts) {
    if (message.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
  }
  const SpyBackend spy;
  try {
    spy.run(batch, levels, out.view());
    return ::testing::AssertionFailure() << "Backend::run accepted the batch";
  } catch (const InvalidBatch& e) {
    if (e.what() != message) return ::testing::AssertionFailure() << "run gave another message: " << e.what();
  }
  if (spy.compute_calls != 0) return ::testing::AssertionFailure() << "compute() ran on an invalid batch";
  return ::testing::AssertionSuccess() << message;
}

::testing::AssertionResult rejected(const RaggedBatch& batch, int levels,
                                    std::initializer_list<std::string_view> parts) {
  return rejected(batch, levels, outputs_for(batch, levels), parts);
}

::testing::AssertionResult rejected(const BatchData& batch, int levels,
                                    std::initializer_list<std::string_view> parts) {
  return rejected(batch.view(), levels, parts);
}

// validate_batch accepts, and Backend::run calls compute() exactly once.
::testing::AssertionResult accepted(const RaggedBatch& batch, int levels) {
  ResultData out = outputs_for(batch, levels);
  try {
    validate_batch(batch, levels, out.view());
    const SpyBackend spy;
    spy.run(batch, levels, out.view());
    if (spy.compute_calls != 1) return ::testing::AssertionFailure() << "compute() ran " << spy.compute_calls << " times";
  } catch (const InvalidBatch& e) {
    return ::testing::AssertionFailure() << "rejected: " << e.what();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult accepted(const BatchData& batch, int levels) { return accepted(batch.view(), levels); }

TEST(Validate, TheBaseBatchIsValid) {
  EXPECT_TRUE(accepted(valid_batch(), kLevels));
  const OutputShape shape = validate_batch(valid_batch().view(), kLevels);
  EXPECT_EQ(shape.rows, 5u);
  EXPECT_EQ(shape.width, 4u);
}

// ---- V, levels, row stride --------------------------------------------------------------------

TEST(Validate, RejectsVocabZero) {
  BatchData batch = valid_batch();
  batch.vocab = 0;
  EXPECT_TRUE(rejected(batch, kLevels, {"vocab", "got 0"}));
}

TEST(Validate, RejectsVocabAboveU32) {
  BatchData batch = valid_batch();
  batch.vocab = batch.row_stride = std::uint64_t{1} << 32;
  batch.rows = 0;  // no logits are needed to reject it
  batch.logit_row_offsets = {0, 0, 0, 0};
  batch.lp_output_offsets = {0, 0, 0, 0};
  EXPECT_TRUE(rejected(batch, kLevels, {"vocab", "4294967296", "4294967295", "padding token"}));
}

TEST(Validate, AcceptsVocabOfU32Max) {
  BatchData batch = valid_batch();
  batch.vocab = batch.row_stride = kU32Max;
  EXPECT_TRUE(accepted(batch, kLevels)) << "V = 2^32 - 1 still fits the padding token";
}

TEST(Validate, RejectsLevelsOutside0To16) {
  EXPECT_TRUE(rejected(valid_batch(), -1, {"levels", "-1", "0..16"}));
  EXPECT_TRUE(rejected(valid_batch(), 17, {"levels", "17", "0..16"}));
  EXPECT_TRUE(accepted(valid_batch(), 0));
  EXPECT_TRUE(accepted(valid_batch(), 16));
}

TEST(Validate, RejectsRowStrideBelowVocab) {
  BatchData batch = valid_batch();
  batch.row_stride = 3;
  EXPECT_TRUE(rejected(batch, kLevels, {"row_stride", "3", "vocab 4"}));
}

TEST(Validate, RejectsRowsTimesStrideOverflowing64Bits) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.row_stride = std::uint64_t{1} << 62;
  EXPECT_TRUE(rejected(batch, kLevels, {"logits", "7 * 4611686018427387904", "overflows the address space"}));
}

// 7 * 2^60 floats fit 64 bits as a count but not as a byte offset.
TEST(Validate, RejectsRowsTimesStrideOverflowingBytes) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.row_stride = std::uint64_t{1} << 60;
  EXPECT_TRUE(rejected(batch, kLevels, {"logits", "7 * 1152921504606846976", "overflows the address space"}));
}

TEST(Validate, RejectsNullLogitsWithRows) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.logits = nullptr;
  EXPECT_TRUE(rejected(batch, kLevels, {"logits", "null", "7 rows"}));
}

// ---- lengths of the offset arrays and sampled_tokens -------------------------------------------

TEST(Validate, RejectsLogitRowOffsetsOfWrongLength) {
  BatchData batch = valid_batch();
  batch.logit_row_offsets.push_back(7);
  EXPECT_TRUE(rejected(batch, kLevels, {"logit_row_offsets", "length 5", "3 entries", "B + 1 = 4"}));
}

TEST(Validate, RejectsTokenRowOffsetsOfWrongLength) {
  BatchData batch = valid_batch();
  batch.token_row_offsets.pop_back();
  EXPECT_TRUE(rejected(batch, kLevels, {"token_row_offsets", "length 3", "3 entries", "B + 1 = 4"}));
}

TEST(Validate, RejectsLpOutputOffsetsOfWrongLength) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets.push_back(5);
  EXPECT_TRUE(rejected(batch, kLevels, {"lp_output_offsets", "length 5", "3 entries", "B + 1 = 4"}));
}

TEST(Validate, RejectsEmptyOffsetArrays) {
  BatchData batch = valid_batch();
  batch.sampled_tokens.clear();
  batch.logit_row_offsets.clear();
  batch.token_row_offsets.clear();
  batch.lp_output_offsets.clear();
  EXPECT_TRUE(rejected(batch, kLevels, {"logit_row_offsets", "length 0", "B + 1 = 1"}));
}

TEST(Validate, RejectsSampledTokensOfWrongLength) {
  BatchData batch = valid_batch();
  batch.sampled_tokens.pop_back();
  EXPECT_TRUE(rejected(batch, kLevels, {"sampled_tokens", "length 2", "offset arrays have length 4", "B = 3"}));
}

// ---- monotone offsets, loo[0] = 0 -------------------------------------------------------------

TEST(Validate, RejectsDecreasingLogitRowOffsets) {
  BatchData batch = valid_batch();
  batch.logit_row_offsets = {0, 3, 2, 7};
  EXPECT_TRUE(rejected(batch, kLevels, {"batch 1", "logit_row_offsets", "[1..2] = 3..2"}));
}

TEST(Validate, RejectsDecreasingTokenRowOffsets) {
  BatchData batch = valid_batch();
  batch.token_row_offsets = {0, 2, 1, 6};
  EXPECT_TRUE(rejected(batch, kLevels, {"batch 1", "token_row_offsets", "[1..2] = 2..1"}));
}

TEST(Validate, RejectsDecreasingLpOutputOffsets) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets = {0, 3, 2, 5};
  EXPECT_TRUE(rejected(batch, kLevels, {"batch 1", "lp_output_offsets", "[1..2] = 3..2"}));
}

TEST(Validate, RejectsOutputOffsetsNotStartingAtZero) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets = {1, 3, 3, 5};
  EXPECT_TRUE(rejected(batch, kLevels, {"lp_output_offsets[0]", "got 1"}));
}

// ---- totals against the arrays ----------------------------------------------------------------

TEST(Validate, RejectsLogitOffsetsPastTheRows) {
  BatchData batch = valid_batch();
  batch.rows = 6;
  EXPECT_TRUE(rejected(batch, kLevels, {"logit_row_offsets[3] = 7", "6 logit rows"}));
}

TEST(Validate, RejectsTokenOffsetsPastTheTokens) {
  BatchData batch = valid_batch();
  batch.tokens.pop_back();
  EXPECT_TRUE(rejected(batch, kLevels, {"token_row_offsets[3] = 6", "5 tokens"}));
}

// ---- per batch: enough logit rows and tokens --------------------------------------------------

TEST(Validate, RejectsMoreOutputRowsThanLogitRows) {
  BatchData batch = valid_batch();
  batch.logit_row_offsets = {0, 3, 5, 7};
  batch.lp_output_offsets = {0, 3, 3, 6};
  EXPECT_TRUE(rejected(batch, kLevels,
                       {"batch 2", "3 output rows", "only 2 logit rows", "logit_row_offsets[2..3] = 5..7"}));
}

TEST(Validate, AcceptsAsManyOutputRowsAsLogitRows) {
  BatchData batch = valid_batch();
  batch.lp_output_offsets = {0, 3, 3, 6};  // batch 2: 3 logit rows, 3 output rows, 2 tokens
  EXPECT_TRUE(accepted(batch, kLevels));
}

TEST(Validate, RejectsTooFewTokens) {
  BatchData batch = valid_batch();
  batch.token_row_offsets = {0, 2, 5, 6};
  batch.lp_output_offsets = {0, 3, 3, 6};
  EXPECT_TRUE(rejected(batch, kLevels,
                       {"batch 2", "3 output rows", "only 1 tokens", "token_row_offsets[2..3] = 5..6", "read 2 tokens"}));
}

TEST(Validate, AcceptsOneTokenFewerThanOutputRows) {
  BatchData batch = valid_batch();
  batch.token_row_offsets = {0, 2, 5, 6};  // batch 2: 1 token, 2 output rows
  EXPECT_TRUE(accepted(batch, kLevels));
}

// ---- tokens the kernel reads --------------------------------------------------------------------

TEST(Validate, RejectsSampledTokenNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[2] = 4;
  EXPECT_TRUE(rejected(batch, kLevels, {"batch 2", "sampled_tokens[2] = 4", "vocab 4"}));
}

TEST(Validate, RejectsReadTokenNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.tokens[5] = 9;
  EXPECT_TRUE(rejected(batch, kLevels, {"batch 2", "tokens[5] = 9", "output row 3", "vocab 4"}));
  batch = valid_batch();
  batch.tokens[0] = kU32Max;
  EXPECT_TRUE(rejected(batch, kLevels, {"batch 0", "tokens[0] = 4294967295", "output row 0"}));
}

TEST(Validate, AcceptsUnreadTokensNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.tokens[2] = kU32Max;  // batch 1 has no output rows
  batch.tokens[3] = 4;
  batch.tokens[4] = 1000;  // batch 2 reads only its last token
  EXPECT_TRUE(accepted(batch, kLevels));
}

TEST(Validate, AcceptsEmptyBatchsSampledTokenNotBelowVocab) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[1] = kU32Max;
  EXPECT_TRUE(accepted(batch, kLevels));
}

// ---- outputs ----------------------------------------------------------------------------------

TEST(Validate, RejectsOutputsOfWrongShape) {
  const BatchData batch = valid_batch();
  EXPECT_TRUE(rejected(batch.view(), kLevels, ResultData(4, 4), {"outputs", "shape [4, 4]", "[N, W] = [5, 4]"}));
  EXPECT_TRUE(rejected(batch.view(), kLevels, ResultData(5, 8), {"outputs", "shape [5, 8]", "[N, W] = [5, 4]"}));
  EXPECT_TRUE(rejected(batch.view(), 0, ResultData(5, 4), {"outputs", "shape [5, 4]", "[N, W] = [5, 1]"}));
}

TEST(Validate, RejectsOutputSpansOfWrongSize) {
  const BatchData batch = valid_batch();
  ResultData short_logits(5, 4);
  short_logits.lp_logits.resize(19);
  EXPECT_TRUE(rejected(batch.view(), kLevels, short_logits, {"lp_logits", "19 elements", "[5, 4]", "needs 20"}));
  ResultData long_tokens(5, 4);
  long_tokens.lp_tokens.resize(21);
  EXPECT_TRUE(rejected(batch.view(), kLevels, long_tokens, {"lp_tokens", "21 elements", "[5, 4]", "needs 20"}));
}

// ---- every registered backend: run() validates before it reads memory --------------------------

TEST(Validate, NoBackendReadsTheLogitsOfAnInvalidBatch) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.logits = nullptr;  // any read crashes
  batch.rows = 0;          // so the fault is logit_row_offsets[3] = 7 > 0 rows, not the null pointer
  ResultData out = outputs_for(batch, kLevels);
  for (const Backend* backend : all_backends()) {
    SCOPED_TRACE(std::string(backend->name()));
    EXPECT_THROW(backend->run(batch, kLevels, out.view()), InvalidBatch);
  }
}

TEST(Validate, NoBackendWritesOutputsOfAnInvalidBatch) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[2] = 4;
  for (const Backend* backend : all_backends()) {
    SCOPED_TRACE(std::string(backend->name()));
    ResultData out = outputs_for(batch.view(), kLevels);
    const ResultData untouched = out;
    EXPECT_THROW(backend->run(batch.view(), kLevels, out.view()), InvalidBatch);
    EXPECT_TRUE(same_bits(out, untouched));
  }
}

}  // namespace
}  // namespace logprobs
