// SPEC §2 steps 1-4 on a hand-built batch: which logit row and token each output row reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "harness/batch_data.hpp"

namespace logprobs {
namespace {

// (output_row, logit_row, token), so that gtest compares and prints them.
using Triple = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;

std::vector<Triple> triples(const std::vector<RowTask>& tasks) {
  std::vector<Triple> out;
  for (const RowTask& t : tasks) out.emplace_back(t.output_row, t.logit_row, t.token);
  return out;
}

TEST(PlanRows, MapsEachOutputRowToItsLogitRowAndToken) {
  // B = 4, V = 100:
  //   batch 0: logit rows [2, 6), tokens [1, 4), 3 output rows (fewer than its logit rows, and
  //            its rows and tokens start past 0)
  //   batch 1: logit rows [6, 7), tokens [4, 9), no output rows
  //   batch 2: logit rows [7, 8), tokens [9, 9), 1 output row (no tokens needed)
  //   batch 3: logit rows [8, 10), tokens [9, 12), 2 output rows
  BatchData batch;
  batch.rows = 10;
  batch.vocab = batch.row_stride = 100;
  batch.logits.assign(batch.rows * batch.row_stride, 0.0f);
  batch.tokens = {90, 11, 12, 13, 94, 95, 96, 97, 98, 31, 32, 33};
  batch.sampled_tokens = {10, 20, 25, 30};
  batch.logit_row_offsets = {2, 6, 7, 8, 10};
  batch.token_row_offsets = {1, 4, 9, 9, 12};
  batch.lp_output_offsets = {0, 3, 3, 4, 6};
  validate_batch(batch.view(), 1);

  const std::vector<Triple> want = {
      // batch 0, r = 2, 1, 0: logit rows 6-3, 6-2, 6-1; tokens[4-2], tokens[4-1], sampled[0]
      {0, 3, 12},
      {1, 4, 13},
      {2, 5, 10},
      // batch 2, r = 0: logit row 7, sampled[2]
      {3, 7, 25},
      // batch 3, r = 1, 0: logit rows 8, 9; tokens[12-1], sampled[3]
      {4, 8, 33},
      {5, 9, 30},
  };
  EXPECT_EQ(triples(plan_rows(batch.view())), want);
}

TEST(PlanRows, EmptyBatchGivesNoTasks) {
  BatchData batch;
  batch.vocab = batch.row_stride = 3;
  batch.logit_row_offsets = batch.token_row_offsets = batch.lp_output_offsets = {0};
  EXPECT_TRUE(plan_rows(batch.view()).empty());
}

}  // namespace
}  // namespace logprobs
