// The CUDA backend's pure logic, tested on the CPU: radix keys, the radix select at both digit
// schedules and its candidate floor, the row mapping, and the launch plan held to the issue's
// targets (decode over at least 64 CTAs; no path reads a row more than twice or runs a whole row
// through one CTA; merges fused into the pass) with its tree and workspace layout. The same
// functions the kernels call. Built by g++ with or without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_kernel_model.hpp"
#include "harness/batch_data.hpp"

namespace logprobs {
namespace {

using namespace cuda_plan;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- Radix keys ---------------------------------------------------------------------------

TEST(CudaRadixKey, NeverACandidate) {
  EXPECT_EQ(radix_key(kNaN), 0u);
  EXPECT_EQ(radix_key(-kNaN), 0u);
  EXPECT_EQ(radix_key(std::bit_cast<float>(0x7F800001u)), 0u);  // signalling NaN
  EXPECT_EQ(radix_key(std::bit_cast<float>(0xFFFFFFFFu)), 0u);
  EXPECT_EQ(radix_key(-kInf), 0u);
}

TEST(CudaRadixKey, OrderPreservingAndZeroHasOneKey) {
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
    const float f = std::bit_cast<float>(std::uint32_t(rng()));
    if (!std::isnan(f)) v.push_back(f);
  }
  for (float f : v) {
    if (f == -kInf) continue;
    const std::uint32_t key = radix_key(f);
    ASSERT_GE(key, 0x00800000u) << f;
    ASSERT_LE(key, 0xFF800000u) << f;
    const float back = value_of_key(key);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(back), std::bit_cast<std::uint32_t>(f == 0.0f ? 0.0f : f)) << f;
  }
  std::sort(v.begin(), v.end());
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (v[i - 1] == -kInf) continue;
    if (v[i - 1] < v[i]) {
      ASSERT_LT(radix_key(v[i - 1]), radix_key(v[i])) << v[i - 1] << " " << v[i];
    } else {
      ASSERT_EQ(radix_key(v[i - 1]), radix_key(v[i])) << v[i];
    }
  }
  // -0 and +0 are equal values, told apart by token as the canonical backend does (SPEC §8).
  EXPECT_EQ(radix_key(-0.0f), radix_key(0.0f));
}

// ---- Radix select -------------------------------------------------------------------------

// The select of `digits` over keys in item order, as the kernels run it (one histogram per digit).
SelectRule select_with(const std::vector<std::uint32_t>& keys, std::uint32_t k, Digits digits, int* passes) {
  if (digits == Digits::block) return cuda_model::radix_select(keys, k);
  RadixState st = radix_begin(k, digits);
  while (!st.done) {
    std::vector<std::uint32_t> hist(kRowBins, 0);
    for (std::uint32_t key : keys)
      if (in_bucket(st, key)) ++hist[digit_of(st, key)];
    st = cuda_model::finish_histogram(st, hist.data());
    ++*passes;
  }
  return st.rule;
}

// The rule and the emit select exactly the K first items under (key descending, index
// ascending), at positions in index order.
void expect_selects_top_k(const std::vector<std::uint32_t>& keys, std::uint32_t k, Digits digits) {
  int passes = 0;
  const SelectRule rule = select_with(keys, k, digits, &passes);
  EXPECT_LE(passes, digit_levels(digits));
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (is_candidate_key(keys[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] > keys[b]; });
  order.resize(std::min<std::size_t>(k, order.size()));
  std::sort(order.begin(), order.end());
  ASSERT_EQ(rule.selected, order.size());
  std::vector<std::size_t> chosen;
  cuda_model::block_emit(keys, rule, 0, 0, [&](std::size_t i, std::uint64_t pos) {
    ASSERT_EQ(pos, chosen.size()) << "positions in item order";
    chosen.push_back(i);
  });
  ASSERT_EQ(chosen, order);
}

std::vector<std::uint32_t> random_keys(std::mt19937& rng, std::size_t n, int kind) {
  std::vector<std::uint32_t> keys(n);
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
        break;  // one value: every digit, then ties
      default:
        key = std::uint32_t(rng()) | 0x00800000u;
        break;  // all bits random
    }
  }
  return keys;
}

TEST(CudaRadixSelect, SelectsExactlyTheKFirstItemsWithEitherDigitSchedule) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t n = 1 + rng() % 3000;
    const std::vector<std::uint32_t> keys = random_keys(rng, n, trial % 5);
    const std::uint32_t k = std::uint32_t(1 + rng() % (trial % 2 ? 300 : n + 10));
    SCOPED_TRACE(testing::Message() << "trial " << trial << " n " << n << " k " << k);
    expect_selects_top_k(keys, k, Digits::block);
    expect_selects_top_k(keys, k, Digits::row);
  }
}

TEST(CudaRadixSelect, EdgeCases) {
  for (Digits d : {Digits::block, Digits::row}) {
    expect_selects_top_k({}, 5, d);
    expect_selects_top_k({0, 0, 0}, 2, d);          // no candidates: all padding
    expect_selects_top_k({radix_key(1.0f)}, 1, d);  // exactly K candidates
    expect_selects_top_k({radix_key(-std::numeric_limits<float>::max()), radix_key(2.0f), 0}, 1, d);
    // The lowest bucket completing K at the first digit (prefix 0): needs more candidates than K.
    expect_selects_top_k({0x00800000u, 0x00800001u, 0x80000000u}, 2, d);
    expect_selects_top_k({radix_key(kInf), radix_key(kInf), radix_key(1.0f)}, 1, d);   // +inf first
    expect_selects_top_k({radix_key(0.0f), radix_key(-0.0f), radix_key(0.0f)}, 2, d);  // zeros tie
  }
  EXPECT_EQ(cuda_model::radix_select({radix_key(1.0f)}, 0).selected, 0u);  // K = 0: nothing selected
}

// The kernels' selection (floor, then select) picks the very items the select alone picks.
TEST(CudaRadixSelect, ThreadMaximaFloorNeverChangesTheSelection) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::uint32_t> keys = random_keys(rng, kCtaItems, trial % 5);
    if (trial % 3 == 0) std::fill(keys.begin() + std::ptrdiff_t(rng() % kCtaItems), keys.end(), 0u);  // a short segment
    const std::uint32_t k = 1 + rng() % (kThreads - 1);
    std::vector<std::size_t> with_floor, without;
    cuda_model::block_emit(keys, cuda_model::block_select(keys, k), 0, 0,
                           [&](std::size_t i, std::uint64_t) { with_floor.push_back(i); });
    cuda_model::block_emit(keys, cuda_model::radix_select(keys, k), 0, 0,
                           [&](std::size_t i, std::uint64_t) { without.push_back(i); });
    ASSERT_EQ(with_floor, without) << trial;
  }
}

// The compaction rule of the threshold path's pass 2 keeps the current bucket and all above it.
TEST(CudaRadixSelect, KeptRuleKeepsTheBucketAndEverythingAbove) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<std::uint32_t> keys = random_keys(rng, 2000, trial % 5);
    RadixState st = radix_begin(1 + rng() % 1500, Digits::row);
    std::vector<std::uint32_t> hist(kRowBins, 0);
    for (std::uint32_t key : keys)
      if (in_bucket(st, key)) ++hist[digit_of(st, key)];
    st = cuda_model::finish_histogram(st, hist.data());
    const SelectRule kept = kept_rule(st);
    for (std::uint32_t key : keys) {
      const bool may_be_selected =
          st.done ? is_above(st.rule, key) : (in_bucket(st, key) || key > (st.prefix | ~st.mask));
      ASSERT_EQ(is_above(kept, key), may_be_selected && is_candidate_key(key)) << trial << " " << key;
    }
  }
}

// ---- Row mapping -------------------------------------------------------------------------

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
      ASSERT_EQ(got.batch_item, t.batch_item) << "trial " << trial << " row " << t.output_row;
    }
  }
}

// ---- The launch plan -----------------------------------------------------------------------

const std::vector<std::uint32_t> kKs = {0, 1, 5, 7, 20, 31, 127, 255, 256, 257, 511, 1023, 4095, 65535};
const std::vector<std::uint64_t> kVocabs = {
    1, 1000, 1024, 1025, 16384, 32000, 128256, 152064, 262144, std::uint64_t{1} << 24, 0xFFFFFFFFull};

TEST(CudaLaunchPlan, DecodeSpreadsOverAtLeast64Ctas) {
  for (std::uint32_t k : kKs) {
    const LaunchPlan p = plan_launch(1, 128256, k);
    EXPECT_EQ(p.segments, 126u);
    EXPECT_GE(first_pass_ctas(p, 1), 64u) << "K " << k;
  }
  EXPECT_EQ(first_pass_ctas(plan_launch(64, 128256, 255), 64), 64u * 126u);
}

TEST(CudaLaunchPlan, NoPathReadsARowMoreThanTwiceOrRunsAWholeRowThroughOneCta) {
  for (std::uint64_t vocab : kVocabs) {
    for (std::uint32_t k : kKs) {
      const LaunchPlan p = plan_launch(64, vocab, k);
      SCOPED_TRACE(testing::Message() << "V " << vocab << " K " << k);
      EXPECT_LE(row_reads(p), 2);
      EXPECT_LE(logit_bytes_read_per_row(p, 2), (2 * vocab + 1) * 2);
      EXPECT_EQ(row_reads(p), p.path == Path::threshold ? 2 : 1);
      if (vocab > kSegment) {
        EXPECT_LT(largest_cta_items(p), vocab);
        EXPECT_LE(largest_cta_items(p), std::max<std::uint64_t>(kCtaItems, vocab / kSegment + 1));
      }
    }
  }
}

TEST(CudaLaunchPlan, PathsAndFusedMerges) {
  EXPECT_EQ(plan_launch(1, 128256, 0).path, Path::stats_only);
  for (std::uint32_t k : {1u, 7u, 20u, 255u, 256u}) {
    const LaunchPlan p = plan_launch(1, 128256, k);
    EXPECT_EQ(p.path, Path::merge_tree) << k;
    EXPECT_LE(p.tree.depth, kMaxMergeDepth) << k;
    EXPECT_LE(p.tree.fan_in * k, kCtaItems) << k;
  }
  EXPECT_EQ(plan_launch(1, 128256, 20).tree.depth, 2);  // 126 segments -> 3 nodes -> the root
  EXPECT_EQ(plan_launch(1, 128256, 7).tree.depth, 1);   // the root merges 126 lists of 7
  for (std::uint32_t k : {257u, 4095u, 65535u}) EXPECT_EQ(plan_launch(1, 128256, k).path, Path::threshold) << k;
  EXPECT_EQ(plan_launch(1, 1000, 65535).path, Path::merge_tree);  // one segment: one CTA, any K
  for (std::uint64_t vocab : kVocabs)
    for (std::uint32_t k : kKs) {
      const LaunchPlan p = plan_launch(8, vocab, k);
      EXPECT_TRUE(path_valid(vocab, k, p.path));
      // stats_only and merge_tree merge inside the first pass (last-arrival counters).
      EXPECT_EQ(kernels_per_group(p), p.path == Path::threshold ? 6 : 2);
    }
}

TEST(CudaLaunchPlan, TreeNodesHaveTheirChildrenOnceAndMergesFitOneCta) {
  for (std::uint64_t segments : {1ull, 2ull, 5ull, 126ull, 257ull, 1025ull, 100000ull}) {
    for (std::uint64_t fan_in : {2ull, 4ull, 51ull, 1024ull}) {
      const Tree t = make_tree(segments, fan_in);
      EXPECT_EQ(t.nodes[t.depth], 1u);
      for (int level = 1; level <= t.depth; ++level) {
        std::uint64_t children = 0;
        for (std::uint64_t node = 0; node < t.nodes[level]; ++node) children += children_of(t, level, node);
        EXPECT_EQ(children, t.nodes[level - 1]);
        EXPECT_EQ(t.first[level], t.first[level - 1] + t.nodes[level - 1]);
      }
    }
  }
  const Tree t = make_tree(10, 4);
  std::vector<int> seen(3 * 5, 0);  // children of node 1: 4..7, K = 5
  for (std::uint64_t i = 0; i < 4 * 5; ++i) {
    const MergeItem m = merge_item(t, 1, 5, i);
    ASSERT_GE(m.child, 4u);
    ASSERT_LT(m.child, 8u);
    ASSERT_LT(m.slot, 5u);
    if (m.child < 7) ++seen[(m.child - 4) * 5 + m.slot];
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST(CudaLaunchPlan, GroupsCoverEveryRowAndRegionsNeverOverlap) {
  for (std::uint64_t rows : {1ull, 7ull, 64ull, 5000ull, 1000000ull}) {
    for (std::uint64_t vocab :
         {std::uint64_t{1000}, std::uint64_t{128256}, std::uint64_t{1} << 24, std::uint64_t{0xFFFFFFFF}}) {
      for (std::uint32_t k : {0u, 20u, 255u, 4095u}) {
        const LaunchPlan p = plan_launch(rows, vocab, k);
        SCOPED_TRACE(testing::Message() << rows << " rows, V " << vocab << " K " << k);
        EXPECT_GE(p.rows_per_group, 1u);
        EXPECT_GE(p.rows_per_group * p.groups, rows);
        EXPECT_LT((p.groups - 1) * p.rows_per_group, rows);
        if (p.rows_per_group > 1) {
          EXPECT_LE(p.workspace_bytes, kDefaultWorkspaceBudget);
        }
        EXPECT_LT(first_pass_ctas(p, p.rows_per_group), std::uint64_t{1} << 31) << "one launch holds a group";
        const Layout l = layout_for(p, p.rows_per_group);
        const std::uint64_t at[] = {l.rows,   l.seg,          l.zeroed,  l.scratch, l.lists,  l.list_counts,
                                    l.select, l.slice_counts, l.tallies, l.bases,   l.slices, l.total};
        EXPECT_TRUE(std::is_sorted(std::begin(at), std::end(at)));
        for (std::uint64_t offset : at) EXPECT_EQ(offset % 256, 0u);
        EXPECT_EQ(l.total, p.workspace_bytes);
      }
    }
  }
}

}  // namespace
}  // namespace logprobs
