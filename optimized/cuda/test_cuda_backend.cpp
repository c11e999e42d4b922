// The `cuda` backend on a device: agreement with the input and the reference (SPEC §5, judged by
// the harness's comparator), determinism and batch invariance (SPEC §6). Every test that
// needs a GPU skips with the reason when none is present; the host-side checks (argument
// errors, validation before any copy, the availability reason) run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "harness/judge.hpp"
#include "logprobs_cuda.hpp"
#include "tests/verdict_assertion.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const Backend& cuda() {
  const Backend* b = find_backend("cuda");
  if (b == nullptr) throw std::runtime_error("backend cuda is not registered");
  return *b;
}

#define SKIP_WITHOUT_DEVICE()                                                        \
  do {                                                                               \
    const Availability a = cuda().availability();                                    \
    if (!a.available) GTEST_SKIP() << "backend cuda unavailable here: " << a.reason; \
  } while (0)

enum class Fill { Normal, Ties, Ascending, Masked, Constant, Large, Special };

void fill_row(float* x, std::uint64_t vocab, Fill fill, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (std::uint64_t j = 0; j < vocab; ++j) {
    switch (fill) {
      case Fill::Normal:
        x[j] = normal(rng);
        break;
      case Fill::Ties:
        x[j] = std::round(normal(rng) * 2) / 2;
        break;
      case Fill::Ascending:
        x[j] = float(j) * 1e-4f;
        break;
      case Fill::Masked:
        x[j] = rng() % 3 == 0 ? normal(rng) : -kInf;
        break;
      case Fill::Constant:
        x[j] = -1.25f;
        break;
      case Fill::Large:
        x[j] = normal(rng) * 3000.0f;
        break;
      case Fill::Special:
        x[j] = normal(rng);
        break;
    }
  }
  if (fill == Fill::Special) {
    switch (rng() % 3) {
      case 0:
        x[rng() % vocab] = kNaN;
        break;
      case 1:
        x[rng() % vocab] = kInf;
        break;
      default:
        for (std::uint64_t j = 0; j < vocab; ++j) x[j] = -kInf;
        break;
    }
  }
}

// B batches, batch b with logit_rows[b] rows and outputs[b] <= logit_rows[b] output rows, every
// row filled by `fill` (rotating through the fills when Fill::Special is not asked for alone).
BatchData make_batch(std::uint64_t vocab, std::uint64_t stride, const std::vector<std::uint32_t>& logit_rows,
                     const std::vector<std::uint32_t>& outputs, Fill fill, std::mt19937& rng) {
  BatchData b;
  b.vocab = vocab;
  b.row_stride = stride;
  b.logit_row_offsets = {0};
  b.token_row_offsets = {0};
  b.lp_output_offsets = {0};
  for (std::size_t i = 0; i < logit_rows.size(); ++i) {
    b.logit_row_offsets.push_back(b.logit_row_offsets.back() + logit_rows[i]);
    const std::uint32_t tokens = outputs[i] == 0 ? 0 : outputs[i] - 1 + rng() % 2;
    b.token_row_offsets.push_back(b.token_row_offsets.back() + tokens);
    b.lp_output_offsets.push_back(b.lp_output_offsets.back() + outputs[i]);
    b.sampled_tokens.push_back(std::uint32_t(rng() % vocab));
  }
  for (std::uint32_t i = 0; i < b.token_row_offsets.back(); ++i) b.tokens.push_back(std::uint32_t(rng() % vocab));
  b.rows = b.logit_row_offsets.back();
  b.logits.assign(b.rows * stride, 7.0f);  // the stride gap holds values no row may read
  for (std::uint64_t r = 0; r < b.rows; ++r) fill_row(b.row(r), vocab, fill, rng);
  return b;
}

void expect_agrees(const BatchData& batch, int levels, const ResultData& got, const std::string& where) {
  ASSERT_TRUE(testing_support::agrees(judge_against_reference(batch, levels, got))) << where;
}

// ---- Everywhere ---------------------------------------------------------------------------

TEST(CudaHost, AvailabilityNamesTheReasonWhenUnavailable) {
  const Availability a = cuda().availability();
  if (!a.available) {
    EXPECT_FALSE(a.reason.empty());
    std::cout << "cuda unavailable: " << a.reason << "\n";
  }
}

TEST(CudaHost, InvalidBatchIsRejectedBeforeAnyDeviceWork) {
  std::mt19937 rng(1);
  BatchData b = make_batch(10, 10, {2}, {2}, Fill::Normal, rng);
  b.sampled_tokens[0] = 10;  // == V
  ResultData out(2, 2);
  EXPECT_THROW(cuda().run(b.view(), 1, out.view()), InvalidBatch);
}

TEST(CudaHost, DeviceApiRejectsBadArgumentsWithoutTouchingTheDevice) {
  DeviceBatch batch;
  batch.vocab = 100;
  batch.output_rows = 3;
  EXPECT_EQ(cuda_logprobs(batch, 17, {}, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda_logprobs(batch, -1, {}, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda_logprobs(batch, 3, {}, nullptr, 0, nullptr), cudaErrorInvalidValue);  // no workspace
  const std::size_t need = cuda_workspace_bytes(3, 100, 3);
  EXPECT_GT(need, 0u);
  char byte = 0;
  EXPECT_EQ(cuda_logprobs(batch, 3, {}, &byte, need - 1, nullptr), cudaErrorInvalidValue);  // too small
  batch.output_rows = 0;
  EXPECT_EQ(cuda_logprobs(batch, 3, {}, nullptr, 0, nullptr), cudaSuccess);  // nothing to do
  EXPECT_EQ(cuda_workspace_bytes(0, 100, 3), 0u);
}

// ---- On a device --------------------------------------------------------------------------

struct Shape {
  std::uint64_t vocab;
  std::uint64_t stride;
  std::vector<std::uint32_t> logit_rows;
  std::vector<std::uint32_t> outputs;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {1, 1, {3}, {3}},
      {37, 41, {2, 0, 4}, {1, 0, 4}},  // odd stride: the scalar load path
      {1000, 1000, {5, 3}, {5, 2}},
      {8193, 8195, {2, 1}, {2, 1}},  // two chunks, misaligned rows
      {20000, 20000, {1, 2}, {1, 2}},
      {128256, 128256, {1}, {1}},  // decode: one row split over 16 CTAs
      {128256, 128257, {3}, {3}},
  };
  return all;
}

TEST(CudaDevice, AgreesWithTheReferenceOnRandomAndSpecialBatches) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(2024);
  for (const Shape& s : shapes()) {
    for (Fill fill :
         {Fill::Normal, Fill::Ties, Fill::Ascending, Fill::Masked, Fill::Constant, Fill::Large, Fill::Special}) {
      const BatchData batch = make_batch(s.vocab, s.stride, s.logit_rows, s.outputs, fill, rng);
      for (int levels : {0, 1, 3, 8, 9, 12, 16}) {
        const ResultData got = run_backend(cuda(), batch, levels);
        expect_agrees(batch, levels, got,
                      "V " + std::to_string(s.vocab) + " stride " + std::to_string(s.stride) + " fill " +
                          std::to_string(int(fill)) + " levels " + std::to_string(levels));
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(CudaDevice, MatchesTheReferenceValuesOnALargeBatch) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(5);
  const BatchData batch =
      make_batch(32000, 32000, std::vector<std::uint32_t>(16, 4), std::vector<std::uint32_t>(16, 4), Fill::Normal, rng);
  for (int levels : {2, 8}) expect_agrees(batch, levels, run_backend(cuda(), batch, levels), "64 x 32000");
}

TEST(CudaDevice, DeterministicAcrossRuns) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(6);
  for (Fill fill : {Fill::Normal, Fill::Ties, Fill::Special}) {
    const BatchData batch = make_batch(128256, 128256, {4, 4}, {4, 4}, fill, rng);
    for (int levels : {0, 8, 12}) {
      const ResultData a = run_backend(cuda(), batch, levels);
      const ResultData b = run_backend(cuda(), batch, levels);
      EXPECT_TRUE(same_bits(a, b)) << "levels " << levels;
    }
  }
}

TEST(CudaDevice, BatchInvariant) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(8);
  for (std::uint64_t vocab : {1000ull, 128256ull}) {
    // Many rows, an odd stride (misaligned rows), ragged batches; then each row alone.
    const BatchData big = make_batch(vocab, vocab + 3, {3, 5, 2}, {3, 4, 2}, Fill::Ties, rng);
    for (int levels : {0, 3, 8, 10}) {
      const ResultData together = run_backend(cuda(), big, levels);
      for (const RowTask& task : plan_rows(big.view())) {
        const ResultData single =
            run_backend(cuda(), single_row_batch(big.view().logit_row(task.logit_row), task.token), levels);
        ASSERT_TRUE(same_row_bits(single, 0, together, task.output_row))
            << "V " << vocab << " levels " << levels << " row " << task.output_row;
      }
    }
  }
}

TEST(CudaDevice, ExponentialsOfAllTopValuesSumToOneWhenKCoversV) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(9);
  const BatchData batch = make_batch(3000, 3000, {2}, {2}, Fill::Normal, rng);
  const ResultData got = run_backend(cuda(), batch, 12);  // K = 4095 >= V
  for (std::uint64_t row = 0; row < got.rows; ++row) {
    double sum = 0;
    for (std::uint32_t slot = 0; slot < top_k(12); ++slot) sum += std::exp(double(got.value(row, slot)));
    EXPECT_NEAR(sum, 1.0, 1e-4) << row;
  }
}

}  // namespace
}  // namespace logprobs
