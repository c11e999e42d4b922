// A sequential model of the CUDA backend's two kernels (cuda_kernel_model.hpp), built from the
// functions the kernels call, judged against the reference by the harness's comparator across
// splits, select paths and special rows. Built by g++ with or without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_kernel_model.hpp"
#include "harness/judge.hpp"
#include "tests/verdict_assertion.hpp"

namespace logprobs {
namespace {

using namespace cuda_model;

// The model's row as a one-row result, judged against the reference on the same row.
::testing::AssertionResult model_agrees(const std::vector<float>& x, std::uint32_t token, int levels) {
  const ModelRow row = model_row(x.data(), x.size(), token, levels);
  const std::uint32_t k = top_k(levels);
  ResultData got(1, slots_per_row(k));
  if (row.tokens.size() != got.width) return ::testing::AssertionFailure() << row.tokens.size() << " slots";
  got.lp_logits = row.values;
  got.lp_tokens = row.tokens;
  return testing_support::agrees(judge_against_reference(single_row_batch(x, token), k, got));
}

std::vector<float> make_row(std::mt19937& rng, std::uint64_t vocab, int kind) {
  std::vector<float> x(vocab);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::uint64_t j = 0; j < vocab; ++j) {
    switch (kind) {
      case 0:
        x[j] = normal(rng);
        break;
      case 1:
        x[j] = std::round(normal(rng) * 2) / 2;
        break;  // heavy ties across chunks
      case 2:
        x[j] = float(j) * 1e-3f;
        break;  // ascending: the top is in the last chunk
      case 3:
        x[j] = rng() % 4 == 0 ? normal(rng) : -kInf;
        break;  // masked
      default:
        x[j] = 2.5f;
        break;  // constant
    }
  }
  return x;
}

TEST(CudaKernelModel, AgreesWithTheReferenceAcrossSplitsAndPaths) {
  std::mt19937 rng(17);
  int rows = 0;
  for (std::uint64_t vocab : {1ull, 37ull, 8192ull, 8193ull, 20000ull, 40000ull}) {
    for (int levels : {0, 1, 3, 8, 9, 12}) {
      for (int kind = 0; kind < 5; ++kind) {
        const std::vector<float> x = make_row(rng, vocab, kind);
        const std::uint32_t token = std::uint32_t(rng() % vocab);
        EXPECT_TRUE(model_agrees(x, token, levels)) << "V " << vocab << " levels " << levels << " kind " << kind;
        ++rows;
      }
    }
  }
  EXPECT_EQ(rows, 6 * 6 * 5);
}

TEST(CudaKernelModel, SpecialRows) {
  const std::uint64_t vocab = 9000;  // two chunks
  for (int levels : {0, 2, 8, 14}) {
    std::vector<std::vector<float>> rows;
    rows.push_back(std::vector<float>(vocab, -kInf));  // only -inf: all padding, NaN values
    std::vector<float> with_nan(vocab, 1.0f);
    with_nan[8500] = kNaN;
    rows.push_back(with_nan);
    std::vector<float> with_inf(vocab, 1.0f);
    with_inf[8191] = kInf;
    with_inf[3] = kInf;
    rows.push_back(with_inf);
    std::vector<float> few(vocab, -kInf);  // fewer candidates than K, in both chunks
    few[10] = 1.0f;
    few[8999] = 2.0f;
    rows.push_back(few);
    for (const auto& x : rows) EXPECT_TRUE(model_agrees(x, 8191, levels)) << "levels " << levels;
  }
}

}  // namespace
}  // namespace logprobs
