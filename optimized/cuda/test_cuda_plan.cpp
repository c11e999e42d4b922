// The CUDA backend's pure logic (optimized/cuda/cuda_plan.hpp), tested on the CPU: radix keys, the
// partial statistics and their combine, the radix select, the row mapping and the launch plan,
// the same functions the kernels call. Built by g++ with or without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_kernel_model.hpp"
#include "harness/batch_data.hpp"

namespace logprobs {
namespace {

using namespace cuda_plan;
using namespace cuda_model;

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// ---- Radix keys ---------------------------------------------------------------------------

TEST(CudaRadixKey, NeverACandidate) {
  EXPECT_EQ(radix_key(kNaN), 0u);
  EXPECT_EQ(radix_key(-kNaN), 0u);
  EXPECT_EQ(radix_key(from_bits(0x7F800001u)), 0u);  // signalling NaN
  EXPECT_EQ(radix_key(from_bits(0xFFFFFFFFu)), 0u);
  EXPECT_EQ(radix_key(-kInf), 0u);
}

TEST(CudaRadixKey, OrderPreservingOverSpecialAndRandomValues) {
  std::vector<float> v = {kInf,
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::max(),
                          -0.0f,
                          0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          1.0f,
                          -1.0f,
                          1e-30f,
                          -1e30f};
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const float f = from_bits(std::uint32_t(rng()));
    if (!std::isnan(f)) v.push_back(f);
  }
  for (float f : v) {
    if (f == -kInf) continue;
    const std::uint32_t key = radix_key(f);
    ASSERT_GE(key, 0x00800000u) << f;
    ASSERT_LE(key, 0xFF800000u) << f;
    const float back = value_of_key(key);
    ASSERT_EQ(std::memcmp(&f, &back, sizeof f), 0) << f;  // exact round trip
  }
  std::sort(v.begin(), v.end());
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (v[i - 1] == -kInf) continue;
    if (v[i - 1] < v[i]) {
      ASSERT_LT(radix_key(v[i - 1]), radix_key(v[i])) << v[i - 1] << " " << v[i];
    }
  }
  EXPECT_LT(radix_key(-0.0f), radix_key(0.0f));  // distinct keys for equal floats: a valid tie-break
}

// ---- Partial statistics -------------------------------------------------------------------

TEST(CudaStats, CombineOfAnySplitMatchesDouble) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(1 + rng() % 3000);
    for (float& f : x) f = normal(rng) + (trial % 5 == 0 ? 1e4f : 0.0f);
    if (trial % 3 == 0)
      for (std::size_t i = 0; i < x.size(); i += 1 + rng() % 7) x[i] = -kInf;
    // The combine's exact answer, in double: NaN for a row of only -inf (-inf - -inf).
    const double m = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (const float v : x) sum += std::exp(double(v) - m);
    const double want = -(m + std::log(sum));
    PartialStats total = empty_stats();
    for (std::size_t begin = 0; begin < x.size();) {
      const std::size_t end = std::min(x.size(), begin + 1 + rng() % 500);
      total = combine_stats(total, stats_of(x, begin, end), StdExp{});
      begin = end;
    }
    const float got = normalizer(total, StdLog{});
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(m)) + 1e-6) << trial;
    }
  }
}

TEST(CudaStats, EmptyAndAllNegativeInfinityPartsCombineToNothing) {
  const PartialStats none = empty_stats();
  const PartialStats neg = stats_of({-kInf, -kInf}, 0, 2);
  EXPECT_EQ(neg.max, -kInf);
  EXPECT_EQ(neg.sum, 0.0f);
  const PartialStats c = combine_stats(none, neg, StdExp{});
  EXPECT_EQ(c.max, -kInf);
  EXPECT_EQ(c.sum, 0.0f);                            // never exp(-inf - -inf) = NaN
  EXPECT_TRUE(std::isnan(normalizer(c, StdLog{})));  // only -inf: NaN (SPEC §3)
  const PartialStats one = stats_of({2.0f}, 0, 1);
  const PartialStats d = combine_stats(neg, one, StdExp{});
  EXPECT_EQ(d.max, 2.0f);
  EXPECT_EQ(d.sum, 1.0f);
  EXPECT_EQ(normalizer(d, StdLog{}), -2.0f);
}

TEST(CudaStats, NaNAndPositiveInfinityMakeTheNormalizerNaN) {
  for (float special : {kNaN, kInf}) {
    const std::vector<float> x = {1.0f, special, 3.0f};
    const PartialStats s = combine_stats(stats_of(x, 0, 1), stats_of(x, 1, 3), StdExp{});
    EXPECT_NE(s.flags, 0u);
    EXPECT_EQ(s.max, 3.0f);  // neither poisons the max
    EXPECT_TRUE(std::isnan(normalizer(s, StdLog{})));
  }
  EXPECT_EQ(special_flags(-kInf), 0u);
}

TEST(CudaStats, CombineIsCommutativeBitwise) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 1000; ++i) {
    const PartialStats a{normal(rng), 1.0f + std::fabs(normal(rng)), 0u};
    const PartialStats b{normal(rng), 1.0f + std::fabs(normal(rng)), 0u};
    const PartialStats ab = combine_stats(a, b, StdExp{});
    const PartialStats ba = combine_stats(b, a, StdExp{});
    EXPECT_EQ(std::memcmp(&ab, &ba, sizeof ab), 0);
  }
}

// ---- Radix select -------------------------------------------------------------------------

void expect_selects_top_k(const std::vector<std::uint32_t>& keys, std::uint32_t k) {
  const SelectRule rule = model_select(keys, k);
  const std::vector<std::int64_t> pos = model_emit(keys, rule);
  std::vector<std::uint32_t> candidates;
  for (std::uint32_t key : keys)
    if (is_candidate_key(key)) candidates.push_back(key);
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  const std::size_t want_count = std::min<std::size_t>(k, candidates.size());
  ASSERT_EQ(rule.selected, want_count);
  std::vector<std::uint32_t> chosen(want_count, 0);
  std::vector<bool> filled(want_count, false);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (pos[i] < 0) continue;
    ASSERT_LT(std::size_t(pos[i]), want_count);
    ASSERT_FALSE(filled[pos[i]]) << "two keys at position " << pos[i];
    filled[pos[i]] = true;
    chosen[pos[i]] = keys[i];
  }
  ASSERT_TRUE(std::all_of(filled.begin(), filled.end(), [](bool b) { return b; }));
  std::sort(chosen.begin(), chosen.end(), std::greater<>());
  candidates.resize(want_count);
  ASSERT_EQ(chosen, candidates);
}

TEST(CudaRadixSelect, SelectsExactlyTheKLargestKeys) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t n = 1 + rng() % 3000;
    std::vector<std::uint32_t> keys(n);
    const int kind = trial % 5;
    for (auto& key : keys) {
      const float f = std::normal_distribution<float>(0, 3)(rng);
      switch (kind) {
        case 0:
          key = radix_key(f);
          break;
        case 1:
          key = radix_key(std::round(f * 4) / 4);
          break;  // many ties
        case 2:
          key = rng() % 3 == 0 ? 0u : radix_key(f);
          break;  // non-candidates mixed in
        case 3:
          key = radix_key(1.5f);
          break;  // one value: every pass, then ties
        default:
          key = std::uint32_t(rng()) | 0x00800000u;
          break;  // all bits random
      }
    }
    const std::uint32_t k = std::uint32_t(1 + rng() % (trial % 2 ? 300 : n + 10));
    SCOPED_TRACE(testing::Message() << "trial " << trial << " n " << n << " k " << k);
    expect_selects_top_k(keys, k);
  }
}

TEST(CudaRadixSelect, EdgeCases) {
  expect_selects_top_k({}, 5);
  expect_selects_top_k({0, 0, 0}, 2);          // no candidates: all padding
  expect_selects_top_k({radix_key(1.0f)}, 1);  // exactly K candidates
  expect_selects_top_k({radix_key(-std::numeric_limits<float>::max()), radix_key(2.0f), 0}, 1);
  // The lowest bucket completing K at the first pass (prefix 0): needs more candidates than K.
  expect_selects_top_k({0x00800000u, 0x00800001u, 0x80000000u}, 2);
  expect_selects_top_k({radix_key(kInf), radix_key(kInf), radix_key(1.0f)}, 1);  // +inf first
  EXPECT_EQ(model_select({radix_key(1.0f)}, 0).selected, 0u);                    // levels 0: nothing selected
  int passes = 0;
  model_select({radix_key(1.0f), radix_key(-1.0f)}, 1, &passes);
  EXPECT_EQ(passes, 1);  // the top byte already separates them: early exit
}

TEST(CudaRadixSelect, ThreadMaximaFloorNeverDropsATopKey) {
  std::mt19937 rng(9);
  const int threads = 64;  // the rule is about any item layout; a small block keeps it fast
  for (int trial = 0; trial < 300; ++trial) {
    const int items = 1 + int(rng() % 16);
    std::vector<std::uint32_t> keys(std::size_t(threads) * items);
    for (auto& key : keys) {
      const float f = std::normal_distribution<float>(0, 2)(rng);
      key = rng() % 5 == 0 ? 0u : radix_key(trial % 2 ? std::round(f) : f);
    }
    const std::uint32_t k = 1 + rng() % (threads - 1);
    std::vector<std::uint32_t> maxima(threads, 0);
    for (int t = 0; t < threads; ++t)
      for (int i = 0; i < items; ++i) maxima[t] = std::max(maxima[t], keys[std::size_t(t) * items + i]);
    const std::uint32_t floor = candidate_floor(model_select(maxima, k));
    std::vector<std::uint32_t> filtered;
    for (std::uint32_t key : keys) filtered.push_back(filter_key(key, floor));
    std::vector<std::uint32_t> a = keys, b = filtered;
    std::sort(a.begin(), a.end(), std::greater<>());
    std::sort(b.begin(), b.end(), std::greater<>());
    const std::size_t top = std::min<std::size_t>(k, std::count_if(a.begin(), a.end(), is_candidate_key));
    ASSERT_TRUE(std::equal(a.begin(), a.begin() + top, b.begin())) << trial;
    expect_selects_top_k(filtered, k);
  }
}

// ---- Row mapping and the launch plan ------------------------------------------------------

TEST(CudaRowMap, MatchesPlanRowsOnRandomRaggedBatches) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 300; ++trial) {
    BatchData b;
    b.vocab = 50;
    const std::size_t batches = rng() % 9;
    b.logit_row_offsets = {0};
    b.token_row_offsets = {0};
    b.lp_output_offsets = {0};
    for (std::size_t i = 0; i < batches; ++i) {
      const std::uint32_t logit_rows = rng() % 4;
      const std::uint32_t outputs = logit_rows == 0 ? 0 : rng() % (logit_rows + 1);
      const std::uint32_t tokens = outputs + rng() % 3;
      b.logit_row_offsets.push_back(b.logit_row_offsets.back() + logit_rows);
      b.token_row_offsets.push_back(b.token_row_offsets.back() + tokens);
      b.lp_output_offsets.push_back(b.lp_output_offsets.back() + outputs);
      b.sampled_tokens.push_back(rng() % 50);
    }
    b.rows = b.logit_row_offsets.back();
    b.row_stride = b.vocab;
    b.logits.assign(b.rows * b.row_stride, 0.0f);
    for (std::size_t i = 0; i < b.token_row_offsets.back(); ++i) b.tokens.push_back(rng() % 50);
    const std::vector<RowTask> want = plan_rows(b.view());
    ASSERT_EQ(want.size(), b.lp_output_offsets.back());
    for (const RowTask& t : want) {
      const DeviceRowTask got =
          map_output_row(t.output_row, batches, b.lp_output_offsets.data(), b.logit_row_offsets.data(),
                         b.token_row_offsets.data(), b.tokens.data(), b.sampled_tokens.data());
      ASSERT_EQ(got.logit_row, t.logit_row) << "trial " << trial << " row " << t.output_row;
      ASSERT_EQ(got.token, t.token) << "trial " << trial << " row " << t.output_row;
    }
  }
}

TEST(CudaLaunchPlan, SplitDependsOnVocabAlone) {
  EXPECT_EQ(kChunkElems, 8192u);
  EXPECT_EQ(splits_for_vocab(1), 1u);
  EXPECT_EQ(splits_for_vocab(8192), 1u);
  EXPECT_EQ(splits_for_vocab(8193), 2u);
  EXPECT_EQ(splits_for_vocab(128256), 16u);
  EXPECT_EQ(splits_for_vocab(0xFFFFFFFFull), 524288u);
  for (std::uint64_t rows : {1ull, 8ull, 64ull, 100000ull}) {
    const LaunchPlan p = plan_launch(rows, 128256, 8);
    EXPECT_EQ(p.splits, 16u);
    EXPECT_TRUE(p.register_merge);  // the common case stays on the one-read path
    EXPECT_EQ(p.k, 255u);
  }
}

TEST(CudaLaunchPlan, ThreadItemLayoutCoversAChunkOnceWithCoalescedQuads) {
  std::vector<int> seen(kChunkElems, 0);
  for (int t = 0; t < kThreads; ++t) {
    for (int q = 0; q < kQuadsPerThread; ++q) {
      const std::uint64_t off = quad_offset(q, t);
      ASSERT_EQ(off % 4, 0u);  // 16-byte aligned whenever the chunk start is
      if (t > 0) {
        ASSERT_EQ(off, quad_offset(q, t - 1) + 4);  // neighbouring threads, neighbouring quads
      }
      for (int j = 0; j < 4; ++j) ++seen[off + j];
    }
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST(CudaLaunchPlan, RegisterMergeOnlyWhenTheCandidatesFitOneBlock) {
  for (std::uint64_t vocab : {1ull, 100ull, 8192ull, 32000ull, 128256ull, 152064ull, 262144ull, 0xFFFFFFFFull}) {
    for (int levels = 0; levels <= 16; ++levels) {
      const LaunchPlan p = plan_launch(64, vocab, levels);
      EXPECT_EQ(p.register_merge, p.splits * p.k <= kMergeCapacity) << vocab << " " << levels;
      if (p.register_merge) {
        EXPECT_LE(merge_items_per_thread(p), kItemsPerThread);
      }
    }
  }
  EXPECT_TRUE(plan_launch(1, 128256, 9).register_merge);    // 16 * 511 fits
  EXPECT_FALSE(plan_launch(1, 128256, 10).register_merge);  // streamed
  EXPECT_TRUE(plan_launch(1, 262144, 8).register_merge);    // the target shapes, levels <= 8
  EXPECT_TRUE(plan_launch(1, 8192, 13).register_merge);     // one chunk: K up to 8191
}

TEST(CudaLaunchPlan, GroupsCoverEveryRowWithinTheWorkspaceBudget) {
  for (std::uint64_t rows : {1ull, 7ull, 64ull, 5000ull, 1000000ull}) {
    for (std::uint64_t vocab : {1000ull, 128256ull, 0xFFFFFFFFull}) {
      for (int levels : {0, 8, 16}) {
        const LaunchPlan p = plan_launch(rows, vocab, levels);
        EXPECT_GE(p.rows_per_group, 1u);
        EXPECT_GE(p.rows_per_group * p.groups, rows);
        EXPECT_LT((p.groups - 1) * p.rows_per_group, rows);
        if (p.rows_per_group > 1) {
          EXPECT_LE(p.workspace_bytes, kDefaultWorkspaceBudget + 512);
        }
        EXPECT_GE(p.workspace_bytes, p.rows_per_group * (p.stats_bytes_per_row + p.candidate_bytes_per_row));
      }
    }
  }
  EXPECT_EQ(grid_size(5, 1u << 20), 5u);
  EXPECT_EQ(grid_size(1ull << 40, 1u << 20), 1u << 20);
}

}  // namespace
}  // namespace logprobs
