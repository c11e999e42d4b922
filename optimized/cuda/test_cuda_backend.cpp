// The `cuda` backend on a device: agreement with the input and the reference (SPEC §5, judged by
// the harness's comparator), the canonical backend's bits (SPEC §8), determinism and batch
// invariance (SPEC §6), and a batch past 2^32 elements filled on the device. Every test that
// needs a GPU skips with the reason when none is present; the host-side checks (argument
// errors, validation before any copy, the availability reason, the declared parts) run everywhere.
#include <cuda_runtime.h>  // the typed cudaMalloc overloads
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "harness/half_precision.hpp"
#include "harness/judge.hpp"
#include "logprobs_cuda.hpp"
#include "test_cuda_fill.hpp"
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

const Backend& canonical() { return *find_backend(kCanonicalName); }

// Within SPEC §5's tolerance of the reference, and SPEC §8's bits: the canonical backend's.
void expect_agrees(const BatchData& batch, std::uint32_t k, bool ranks, const std::string& where) {
  const ResultData got = run_backend(cuda(), batch, k, ranks);
  ASSERT_TRUE(testing_support::agrees(judge_against_reference(batch, k, got))) << where;
  ASSERT_EQ(first_bit_difference(got, run_backend(canonical(), batch, k, ranks)), "") << where;
}

// K on both sides of every path boundary at V = 128256 (cuda_plan.hpp): statistics only, the
// merge tree at depth 1 to 4, the threshold path.
const std::vector<std::uint32_t>& ks() {
  static const std::vector<std::uint32_t> all = {0, 1, 5, 7, 20, 127, 255, 256, 257, 4095, 65535};
  return all;
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
  EXPECT_EQ(cuda_logprobs(batch, 65536, {}, nullptr, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda_logprobs(batch, 3, {}, nullptr, 0, nullptr), cudaErrorInvalidValue);  // no workspace
  const std::size_t need = cuda_workspace_bytes(3, 100, 3);
  EXPECT_GT(need, 0u);
  char byte = 0;
  EXPECT_EQ(cuda_logprobs(batch, 3, {}, &byte, need - 1, nullptr), cudaErrorInvalidValue);  // too small
  batch.output_rows = 0;
  EXPECT_EQ(cuda_logprobs(batch, 3, {}, nullptr, 0, nullptr), cudaSuccess);  // nothing to do
  EXPECT_EQ(cuda_workspace_bytes(0, 100, 3), 0u);
  EXPECT_EQ(cuda_workspace_bytes(3, 100, 65536), 0u);
}

TEST(CudaHost, DeclaresEveryPartAndTheCanonicalArithmetic) {
  const Features f = cuda().features();
  EXPECT_TRUE(f.bf16_logits && f.f16_logits && f.temperatures && f.ranks && f.any_k);
  EXPECT_TRUE(cuda().claims_canonical_arithmetic());
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
      for (std::uint32_t k : ks()) {
        expect_agrees(batch, k, k % 2 == 1,
                      "V " + std::to_string(s.vocab) + " stride " + std::to_string(s.stride) + " fill " +
                          std::to_string(int(fill)) + " K " + std::to_string(k));
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
  for (std::uint32_t k : {3u, 255u, 4095u}) expect_agrees(batch, k, true, "64 x 32000 K " + std::to_string(k));
}

TEST(CudaDevice, DeterministicAcrossRuns) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(6);
  for (Fill fill : {Fill::Normal, Fill::Ties, Fill::Special}) {
    const BatchData batch = make_batch(128256, 128256, {4, 4}, {4, 4}, fill, rng);
    for (std::uint32_t k : {0u, 255u, 4095u}) {
      const ResultData a = run_backend(cuda(), batch, k, true);
      const ResultData b = run_backend(cuda(), batch, k, true);
      EXPECT_TRUE(same_bits(a, b)) << "K " << k;
    }
  }
}

TEST(CudaDevice, BatchInvariant) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(8);
  for (std::uint64_t vocab : {1000ull, 128256ull}) {
    // Many rows, an odd stride (misaligned rows), ragged batches; then each row alone.
    const BatchData big = make_batch(vocab, vocab + 3, {3, 5, 2}, {3, 4, 2}, Fill::Ties, rng);
    for (std::uint32_t k : {0u, 7u, 255u, 1023u}) {
      const ResultData together = run_backend(cuda(), big, k);
      for (const RowTask& task : plan_rows(big.view())) {
        const ResultData single =
            run_backend(cuda(), single_row_batch(big.view().logit_row(task.logit_row), task.token), k);
        ASSERT_TRUE(same_row_bits(single, 0, together, task.output_row))
            << "V " << vocab << " K " << k << " row " << task.output_row;
      }
    }
  }
}

TEST(CudaDevice, ExponentialsOfAllTopValuesSumToOneWhenKCoversV) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(9);
  const BatchData batch = make_batch(3000, 3000, {2}, {2}, Fill::Normal, rng);
  const ResultData got = run_backend(cuda(), batch, 4095);  // K >= V
  for (std::uint64_t row = 0; row < got.rows; ++row) {
    double sum = 0;
    for (std::uint32_t slot = 0; slot < 4095; ++slot) sum += std::exp(double(got.value(row, slot)));
    EXPECT_NEAR(sum, 1.0, 1e-4) << row;
  }
}

// 16-bit logits read as 16 bits, and temperatures (an f32 division), at every path.
TEST(CudaDevice, SixteenBitLogitsAndTemperaturesGiveTheCanonicalBits) {
  SKIP_WITHOUT_DEVICE();
  std::mt19937 rng(12);
  for (std::uint64_t vocab : {1000ull, 20000ull, 128256ull}) {
    const BatchData f32 = make_batch(vocab, vocab + 1, {2, 3}, {2, 2}, Fill::Ties, rng);
    for (LogitsDtype dtype : {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16}) {
      BatchData batch = dtype == LogitsDtype::f32 ? f32 : with_dtype(f32, dtype);
      for (bool divide : {false, true}) {
        if (divide) batch.temperatures = std::vector<float>{0.7f, 1.3f};
        for (std::uint32_t k : {0u, 20u, 4095u})
          expect_agrees(batch, k, true,
                        "V " + std::to_string(vocab) + " " + std::string(dtype_name(dtype)) +
                            (divide ? " with temperatures" : "") + " K " + std::to_string(k));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// SPEC §1: 64-bit indexing on the device. 4097 rows of V = 2^20 + 3 bf16 logits, 4,296,028,163
// entries (past 2^32), filled on the device by a formula of each entry's index; rows on both
// sides of 2^32 checked bit for bit against the canonical backend run on the host on the same
// formula, on the merge-tree path and the threshold path, with ranks.
TEST(CudaDevice, PastTwoToThe32ElementsFilledOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  constexpr std::uint64_t kVocab = (std::uint64_t{1} << 20) + 3, kRows = 4097;
  static_assert(kVocab * kRows > (std::uint64_t{1} << 32));
  const std::uint64_t bytes = kVocab * kRows * 2;
  std::size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < bytes + (std::uint64_t{1} << 30))
    GTEST_SKIP() << "needs " << (bytes >> 20) << " MiB of device memory and 1 GiB more; " << (free_bytes >> 20)
                 << " MiB free";
  std::uint16_t* logits = nullptr;
  ASSERT_EQ(cudaMalloc(&logits, bytes), cudaSuccess);
  ASSERT_EQ(cuda_test::fill_large_logits(logits, kVocab * kRows), 0);

  std::vector<std::uint32_t> offsets(kRows + 1), no_tokens(kRows + 1, 0), sampled(kRows);
  for (std::uint64_t i = 0; i <= kRows; ++i) offsets[i] = std::uint32_t(i);
  for (std::uint64_t i = 0; i < kRows; ++i) sampled[i] = std::uint32_t(cuda_test::large_fill_bits(i) * 16 % kVocab);
  const auto upload = [](const std::vector<std::uint32_t>& v) {
    std::uint32_t* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, v.size() * 4), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  };
  std::uint32_t *d_offsets = upload(offsets), *d_tokens = upload(no_tokens), *d_sampled = upload(sampled);
  DeviceBatch batch;
  batch.logits = logits;
  batch.dtype = DeviceDtype::bf16;
  batch.rows = batch.batch_size = batch.output_rows = kRows;
  batch.vocab = batch.row_stride = kVocab;
  batch.tokens = batch.token_row_offsets = d_tokens;
  batch.sampled_tokens = d_sampled;
  batch.logit_row_offsets = batch.lp_output_offsets = d_offsets;

  for (std::uint32_t k : {5u, 4095u}) {
    const std::uint64_t width = std::uint64_t(k) + 1;
    DeviceOutput out;
    ASSERT_EQ(cudaMalloc(&out.lp_logits, kRows * width * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out.lp_tokens, kRows * width * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out.lp_ranks, kRows * 4), cudaSuccess);
    const std::size_t workspace_bytes = cuda_workspace_bytes(kRows, kVocab, k);
    void* workspace = nullptr;
    ASSERT_EQ(cudaMalloc(&workspace, workspace_bytes), cudaSuccess);
    ASSERT_EQ(cuda_logprobs(batch, k, out, workspace, workspace_bytes, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (std::uint64_t row : {std::uint64_t{0}, std::uint64_t{2048}, kRows - 2, kRows - 1}) {
      ResultData got(1, width, true);
      ASSERT_EQ(cudaMemcpy(got.lp_logits.data(), out.lp_logits + row * width, width * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.lp_tokens.data(), out.lp_tokens + row * width, width * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.lp_ranks.data(), out.lp_ranks + row, 4, cudaMemcpyDeviceToHost), cudaSuccess);
      BatchData alone = single_row_batch(std::vector<float>(kVocab), sampled[row]);
      alone.dtype = LogitsDtype::bf16;
      alone.logits.clear();
      alone.logits16.resize(kVocab);
      for (std::uint64_t j = 0; j < kVocab; ++j) alone.logits16[j] = cuda_test::large_fill_bits(row * kVocab + j);
      EXPECT_EQ(first_bit_difference(got, run_backend(canonical(), alone, k, true)), "") << "row " << row << " K " << k;
    }
    for (void* p : {static_cast<void*>(out.lp_logits), static_cast<void*>(out.lp_tokens),
                    static_cast<void*>(out.lp_ranks), workspace})
      cudaFree(p);
  }
  for (void* p : {static_cast<void*>(logits), static_cast<void*>(d_offsets), static_cast<void*>(d_tokens),
                  static_cast<void*>(d_sampled)})
    cudaFree(p);
}

}  // namespace
}  // namespace logprobs
