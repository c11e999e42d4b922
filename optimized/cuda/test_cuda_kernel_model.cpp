// The CUDA kernels' host model (cuda_kernel_model.hpp), built from the functions the kernels call,
// held bit for bit to the `canonical` backend (SPEC §8's definition, entry by entry) and to the
// `cpu` backend, on every path the launch plan can take: on the property generators' random
// ragged batches (every dtype, temperatures, ranks, special values, any K) and on seeded rows at
// the segment, chunk and path boundaries. A planted one-ulp error shows that the comparison
// catches the smallest difference there is. Built by g++ with or without CUDA.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "batch_view.hpp"
#include "cuda_kernel_model.hpp"
#include "fuzz/generators.hpp"
#include "harness/half_precision.hpp"
#include "harness/judge.hpp"

namespace logprobs {
namespace {

using cuda_plan::Path;
static_assert(cuda_plan::kMaxK == kMaxK);

// Before RapidCheck first reads its configuration; an RC_PARAMS from the environment wins.
const bool kModestCaseCount = [] { return ::setenv("RC_PARAMS", "max_success=40", /*overwrite=*/0) == 0; }();

// The model's result for a (valid) batch on `path`.
ResultData model_result(const BatchData& data, std::uint32_t k, bool ranks, Path path) {
  const DeviceBatch b = device_batch_of(data.view());
  ResultData got(b.output_rows, slots_per_row(k), ranks);
  if (b.output_rows > 0)
    cuda_model::KernelModel::run(
        b, k, {got.lp_logits.data(), got.lp_tokens.data(), ranks ? got.lp_ranks.data() : nullptr}, path);
  return got;
}

std::vector<Path> paths_for(std::uint64_t vocab, std::uint32_t k) {
  std::vector<Path> paths;
  for (Path p : {Path::stats_only, Path::merge_tree, Path::threshold})
    if (cuda_plan::path_valid(vocab, k, p)) paths.push_back(p);
  return paths;
}

const char* path_name(Path p) {
  return p == Path::stats_only ? "stats_only" : p == Path::merge_tree ? "merge_tree" : "threshold";
}

// Where the model first differs from the canonical backend (and the cpu backend), on every path
// valid for the case; "" when every bit agrees.
std::string model_difference(const BatchData& batch, std::uint32_t k, bool ranks) {
  const ResultData want = run_backend(*find_backend(kCanonicalName), batch, k, ranks);
  if (const std::string d = first_bit_difference(run_backend(*find_backend("cpu"), batch, k, ranks), want); !d.empty())
    return "cpu against canonical: " + d;
  for (const Path path : paths_for(batch.vocab, k))
    if (const std::string d = first_bit_difference(model_result(batch, k, ranks, path), want); !d.empty())
      return std::string(path_name(path)) + " at K = " + std::to_string(k) + ": " + d;
  return "";
}

// At most 2^20 output slots, as the property tests allow.
std::uint32_t bounded_k(std::uint32_t k, const BatchData& batch) {
  const std::uint64_t rows = std::max<std::uint64_t>(batch.lp_output_offsets.back(), 1);
  return std::uint32_t(std::min<std::uint64_t>(k, (std::uint64_t{1} << 20) / rows - 1));
}

RC_GTEST_PROP(CudaKernelModel, GivesTheCanonicalBitsOnRandomBatches, ()) {
  const BatchData batch = *gen::batch();
  const std::uint32_t k = bounded_k(*gen::k(), batch);
  const bool ranks = *rc::gen::arbitrary<bool>();
  if (const std::string d = model_difference(batch, k, ranks); !d.empty()) RC_FAIL(d);
}

// One row of V entries of a kind, evaluating `token`.
BatchData row_of(std::uint64_t vocab, int kind, std::mt19937& rng, std::uint32_t token) {
  std::vector<float> x(vocab);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::uint64_t j = 0; j < vocab; ++j) {
    switch (kind) {
      case 0:
        x[j] = normal(rng);
        break;
      case 1:
        x[j] = std::round(normal(rng) * 2) / 2;
        break;  // ties across segments
      case 2:
        x[j] = float(j) * 1e-3f;
        break;  // ascending: the top in the last segment
      case 3:
        x[j] = rng() % 4 == 0 ? normal(rng) : -std::numeric_limits<float>::infinity();
        break;
      case 4:
        x[j] = (j % 2 == 0 ? -0.0f : 0.0f);
        break;  // equal values of both signs of zero
      default:
        x[j] = 2.5f;
        break;  // constant: one tie group holds every entry
    }
  }
  return single_row_batch(x, token % vocab);
}

// The segment (1024), chunk (16384) and merge-tree boundaries, and the path boundaries at
// V = 128256 (K = 256: depth 4; 257: threshold), every row kind, each dtype, with temperatures.
TEST(CudaKernelModel, GivesTheCanonicalBitsAtEveryBoundary) {
  std::mt19937 rng(14);
  int checked = 0;
  for (std::uint64_t vocab : {1ull, 63ull, 1023ull, 1024ull, 1025ull, 16383ull, 16385ull, 128256ull}) {
    for (std::uint32_t k : {0u, 1u, 5u, 20u, 127u, 256u, 257u, 1023u, 65535u}) {
      for (int kind = 0; kind < 6; ++kind) {
        BatchData batch = row_of(vocab, kind, rng, std::uint32_t(rng()));
        if (kind == 1) batch = with_dtype(batch, LogitsDtype::bf16);
        if (kind == 2) batch = with_dtype(batch, LogitsDtype::f16);
        if (kind == 3) batch.temperatures = std::vector<float>{0.7f};
        ASSERT_EQ(model_difference(batch, k, kind % 2 == 0), "") << "V " << vocab << " kind " << kind;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 8 * 9 * 6);
}

TEST(CudaKernelModel, GivesTheCanonicalBitsOnSpecialRows) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::uint64_t vocab = 3000;  // three segments
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(vocab, -inf));  // only -inf: all padding, NaN values
  rows.push_back(std::vector<float>(vocab, 1.0f));
  rows.back()[2500] = nan;
  rows.push_back(std::vector<float>(vocab, 1.0f));
  rows.back()[1023] = inf;
  rows.back()[3] = inf;
  rows.push_back(std::vector<float>(vocab, -inf));  // fewer candidates than K, in two segments
  rows.back()[10] = 1.0f;
  rows.back()[2999] = 2.0f;
  for (const auto& x : rows)
    for (std::uint32_t token : {0u, 10u, 1023u, 2500u})
      for (std::uint32_t k : {0u, 2u, 255u, 4095u})
        ASSERT_EQ(model_difference(single_row_batch(x, token), k, true), "");
}

// A difference of one ulp in one value, planted in the model's result, is a difference.
TEST(CudaKernelModel, TheBitComparisonCatchesOneUlp) {
  std::mt19937 rng(3);
  const BatchData batch = row_of(20000, 0, rng, 77);
  for (const Path path : paths_for(batch.vocab, 20)) {
    ResultData got = model_result(batch, 20, true, path);
    ASSERT_EQ(first_bit_difference(got, run_backend(*find_backend(kCanonicalName), batch, 20, true)), "");
    got.lp_logits[7] = std::nextafter(got.lp_logits[7], 0.0f);
    EXPECT_NE(first_bit_difference(got, run_backend(*find_backend(kCanonicalName), batch, 20, true)), "")
        << path_name(path);
  }
}

// The model's pieces against the definition's: each segment's partial, and the tree.
TEST(CudaKernelModel, SegmentStatsAndTreeAreTheDefinitions) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (std::uint64_t n : {1ull, 17ull, 64ull, 65ull, 1000ull, 1024ull}) {
    std::vector<std::vector<float>> x(cuda_plan::kThreads, std::vector<float>(cuda_plan::kRounds));
    std::vector<float> flat(n);
    for (int t = 0; t < cuda_plan::kThreads; ++t)
      for (int r = 0; r < cuda_plan::kRounds; ++r) {
        const std::uint64_t j = cuda_plan::item_of(r, t);
        x[t][r] = j < n ? normal(rng) : -std::numeric_limits<float>::infinity();
        if (j < n) flat[j] = x[t][r];
      }
    std::uint32_t flags = 0;
    const canonical::Partial want = canonical::segment_partial(flat.data(), n, flags);
    const cuda_plan::SegStats got = cuda_model::segment_stats(x, n, 0.0f);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got.max), std::bit_cast<std::uint32_t>(want.max)) << n;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got.sum), std::bit_cast<std::uint32_t>(want.sum)) << n;
  }
  for (std::uint64_t count : {1ull, 2ull, 3ull, 16ull, 17ull, 126ull, 257ull, 1000ull}) {
    std::vector<cuda_plan::SegStats> seg(count);
    std::vector<canonical::Partial> parts(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      seg[i] = {normal(rng), 1.0f + std::abs(normal(rng)), 0u, 0u};
      parts[i] = cuda_plan::partial_of(seg[i]);
    }
    const double want = canonical::normalizer(canonical::pairwise_tree(parts.data(), count), 0);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(cuda_model::root_stats(seg.data(), count).normalizer),
              std::bit_cast<std::uint64_t>(want))
        << count;
  }
}

}  // namespace
}  // namespace logprobs
