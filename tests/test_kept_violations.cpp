// A verdict counts every violation but keeps only the first ones (issue 24, finding 6: a result
// wrong at every slot kept 4.2 M of them, 1.2 GB). The kept ones must be the first in row order
// whatever the number of threads that judged, the counts complete, the failed rows complete, and
// what they take charged to a budget before judging. Run under ThreadSanitizer too (label
// concurrency): the comparator shares a batch of 2^14 entries or more among its threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "harness/judge.hpp"

namespace logprobs {
namespace {

constexpr std::uint32_t kK = 7;  // W = 8
constexpr std::uint64_t kRows = 64, kVocab = 512;  // 2^15 entries: shared among the threads

// One batch item of kRows output rows over distinct logits.
BatchData wide_batch() {
  BatchData b;
  b.vocab = b.row_stride = kVocab;
  b.rows = kRows;
  b.logits.resize(kRows * kVocab);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0, 3);
  for (float& x : b.logits) x = normal(random);
  b.tokens.assign(kRows - 1, 3);
  b.sampled_tokens = {5};
  b.logit_row_offsets = b.lp_output_offsets = {0, std::uint32_t(kRows)};
  b.token_row_offsets = {0, std::uint32_t(kRows - 1)};
  return b;
}

// The reference's result with every value of the given rows off by 1 (a value violation per
// slot: kK + 1 a row).
ResultData wrong_in_rows(const ResultData& reference, const std::vector<std::uint64_t>& rows) {
  ResultData got = reference;
  for (const std::uint64_t row : rows)
    for (std::uint64_t slot = 0; slot < got.width; ++slot) got.lp_logits[row * got.width + slot] += 1.0f;
  return got;
}

Verdict judged_on(int threads, const BatchData& b, const ResultData& reference, const ResultData& got,
                  KeptViolations kept) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  Verdict v = compare_result(b, kK, reference, got, {}, kept);
  omp_set_num_threads(before);
  return v;
}

void expect_first_of(const Verdict& all, const Verdict& v, std::uint64_t limit, const std::string& where) {
  ASSERT_EQ(v.violations.size(), std::min<std::uint64_t>(limit, all.violations.size())) << where;
  for (std::size_t i = 0; i < v.violations.size(); ++i) {
    const Violation &want = all.violations[i], &got = v.violations[i];
    EXPECT_EQ(got.message(), want.message()) << where << ", kept violation " << i;
    EXPECT_EQ(got.rule, want.rule) << where;
  }
  EXPECT_EQ(v.violation_count, all.violation_count) << where;
  EXPECT_EQ(v.rule_counts, all.rule_counts) << where;
  EXPECT_EQ(v.dropped(), all.violation_count - v.violations.size()) << where;
  ASSERT_EQ(v.failed_rows.size(), all.failed_rows.size()) << where;
  for (std::size_t i = 0; i < v.failed_rows.size(); ++i) {
    EXPECT_EQ(v.failed_rows[i].output_row, all.failed_rows[i].output_row) << where;
    EXPECT_EQ(v.failed_rows[i].rules, all.failed_rows[i].rules) << where;
  }
  EXPECT_EQ(v.stats.rows, all.stats.rows) << where;
  EXPECT_EQ(v.stats.max_abs_error, all.stats.max_abs_error) << where;
  EXPECT_FALSE(v.ok()) << where << ": a verdict that keeps none still fails";
}

// Every row wrong (each thread's blocks full), and a few rows wrong far apart (the blocks holding
// them found more than their share of the limit, so the first ones come from a second look).
TEST(KeptViolations, TheFirstInRowOrderWhateverTheThreads) {
  const BatchData b = wide_batch();
  const ResultData reference = run_backend(reference_backend(), b, kK);
  std::vector<std::uint64_t> every(kRows);
  std::iota(every.begin(), every.end(), 0);
  for (const auto& rows : {every, std::vector<std::uint64_t>{0, 40, 41, 63}}) {
    const ResultData got = wrong_in_rows(reference, rows);
    const Verdict all = judged_on(1, b, reference, got, {.max_kept = UINT64_MAX});
    ASSERT_EQ(all.violation_count, rows.size() * (kK + 1));
    ASSERT_EQ(all.violations.size(), all.violation_count);
    ASSERT_EQ(all.count(Rule::value), all.violation_count);
    for (const int threads : {1, 2, 3, 8, 64})
      for (const std::uint64_t limit : {0, 1, 5, 9, 17, 31, 32, 100, 511, 512, 513}) {
        const std::string where =
            "rows wrong " + std::to_string(rows.size()) + ", threads " + std::to_string(threads) + ", limit " +
            std::to_string(limit);
        expect_first_of(all, judged_on(threads, b, reference, got, {.max_kept = limit}), limit, where);
      }
  }
}

TEST(KeptViolations, WhatTheVerdictCanHoldIsChargedBeforeJudging) {
  const BatchData b = wide_batch();
  const ResultData reference = run_backend(reference_backend(), b, kK);
  const ResultData got = wrong_in_rows(reference, {0, 1, 2});
  const std::uint64_t bytes = verdict_bytes(kRows, kK + 1, 10);
  EXPECT_GE(bytes, 10 * (sizeof(Violation) + 64));
  MemoryBudget roomy(bytes);
  const Verdict v = compare_result(b, kK, reference, got, {}, {.max_kept = 10, .budget = &roomy});
  EXPECT_EQ(roomy.used(), bytes);
  EXPECT_EQ(v.violations.size(), 10u);
  EXPECT_EQ(v.violation_count, 24u);
  for (const Violation& kept : v.violations) EXPECT_LT(kept.what.size(), 256u) << kept.what;
  MemoryBudget tight(bytes - 1);
  EXPECT_THROW(compare_result(b, kK, reference, got, {}, {.max_kept = 10, .budget = &tight}), MemoryBudgetExceeded);
  // A limit beyond what any result can break is charged for what this one can: 3 W + 2 a row.
  EXPECT_EQ(verdict_bytes(kRows, kK + 1, UINT64_MAX), verdict_bytes(kRows, kK + 1, kRows * (3 * (kK + 1) + 2)));
  EXPECT_EQ(verdict_bytes(std::uint64_t{1} << 44, 1 << 10, UINT64_MAX), UINT64_MAX);  // saturates, no wrap
}

}  // namespace
}  // namespace logprobs
