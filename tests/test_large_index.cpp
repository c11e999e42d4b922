// SPEC §1: all index arithmetic is 64-bit. A batch whose rows lie past 2^32 elements, without
// 16 GiB of memory: a sparse anonymous mapping reserves the address space, and only the rows the
// batch reads are written (so only their pages exist). Every available host backend must then
// give the result worked out by hand (hand_case_support.hpp, judged by the comparator), and the
// validator must accept the batch.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "hand_case_support.hpp"
#include "harness/host_backends.hpp"

namespace logprobs {
namespace {

// A row stride just past 2^31 elements: row 2 starts past 2^32, and 32-bit index arithmetic
// (signed or unsigned) lands somewhere else. Odd, so rows are not vector-aligned either.
constexpr std::uint64_t kRowStride = (std::uint64_t{1} << 31) + 1001;
constexpr std::uint64_t kVocab = 1537;
constexpr std::uint64_t kRows = 5;

// An anonymous private mapping that reserves address space without committing memory.
class SparseMapping {
 public:
  explicit SparseMapping(std::uint64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      error_ = std::strerror(errno);
    } else {
      data_ = static_cast<float*>(p);
    }
  }
  ~SparseMapping() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  SparseMapping(const SparseMapping&) = delete;
  SparseMapping& operator=(const SparseMapping&) = delete;

  float* data() const { return data_; }
  const std::string& error() const { return error_; }

 private:
  std::uint64_t bytes_;
  float* data_ = nullptr;
  std::string error_;
};

// Batch 0 owns logit rows 0..2 with three output rows; batch 1 owns rows 3..4 with one output
// row, which reads row 4 (past 2^33 elements). Row 3 is never read and never touched.
struct LargeBatch {
  std::vector<std::uint32_t> tokens = {11, 1536};
  std::vector<std::uint32_t> sampled_tokens = {700, 3};
  std::vector<std::uint32_t> logit_row_offsets = {0, 3, 5};
  std::vector<std::uint32_t> token_row_offsets = {0, 2, 2};
  std::vector<std::uint32_t> lp_output_offsets = {0, 3, 4};
  // (logit row, evaluated token) of output rows 0..3, by SPEC §2.
  std::vector<hand::Want> reads = {{0, 11}, {1, 1536}, {2, 700}, {4, 3}};

  RaggedBatch view(const float* logits) const {
    return {.logits = logits,
            .rows = kRows,
            .vocab = kVocab,
            .row_stride = kRowStride,
            .tokens = tokens,
            .sampled_tokens = sampled_tokens,
            .logit_row_offsets = logit_row_offsets,
            .token_row_offsets = token_row_offsets,
            .lp_output_offsets = lp_output_offsets,
            .temperatures = std::nullopt};
  }
};

// Distinct values per row and across rows (so a read of the wrong row shows), and in row 1 a
// masked (-inf) entry every 7th token.
void write_row(float* row, std::uint64_t i) {
  std::vector<std::uint32_t> order(kVocab);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(i)));
  for (std::uint64_t j = 0; j < kVocab; ++j) row[j] = static_cast<float>(order[j]) * 0.004f - 3.0f + 0.5f * i;
  if (i == 1) {
    for (std::uint64_t j = 0; j < kVocab; j += 7) row[j] = -std::numeric_limits<float>::infinity();
  }
}

TEST(LargeIndex, RowsPast2To32ElementsGiveTheValuesComputedHere) {
  const LargeBatch batch;
  const std::uint64_t elements = (kRows - 1) * kRowStride + kVocab;  // through the last row's V
  ASSERT_GT(elements, std::uint64_t{1} << 33);
  const SparseMapping mapping(elements * sizeof(float));
  if (mapping.data() == nullptr)
    GTEST_SKIP() << "mmap of " << elements * sizeof(float) / (1u << 30)
                 << " GiB (MAP_NORESERVE) failed: " << mapping.error();
  for (const hand::Want& read : batch.reads) write_row(mapping.data() + read.logit_row * kRowStride, read.logit_row);

  const RaggedBatch view = batch.view(mapping.data());
  for (const Backend* backend : available_host_backends()) {
    for (const std::uint32_t k : {0u, 1u, 15u, 2047u}) {  // K = 2047 > V: padding
      ResultData got(batch.reads.size(), slots_per_row(k));
      ASSERT_NO_THROW(validate_batch(view, k, got.view()));
      backend->run(view, k, got.view());
      EXPECT_TRUE(hand::matches_by_hand(view, k, got, batch.reads)) << backend->name() << ", K = " << k;
    }
  }
}

TEST(LargeIndex, RowsTimesStrideOverflowing64BitsIsRejected) {
  const float one_logit = 0;  // never read: validation fails first
  // One batch item with one output row on logit row 0: valid but for the overflow.
  const std::vector<std::uint32_t> no_tokens;
  const std::vector<std::uint32_t> sampled = {0};
  const std::vector<std::uint32_t> one_row = {0, 1};
  const std::vector<std::uint32_t> no_token_rows = {0, 0};
  struct Shape {
    std::uint64_t rows, row_stride;
  };
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  // The fourth fits 64 bits as a count of floats (2^61) but not as a byte offset.
  for (const Shape shape : {Shape{std::uint64_t{1} << 33, (std::uint64_t{1} << 31) + 1}, Shape{3, max / 2},
                            Shape{max, 2}, Shape{std::uint64_t{1} << 30, std::uint64_t{1} << 31}}) {
    const RaggedBatch batch{.logits = &one_logit,
                            .rows = shape.rows,
                            .vocab = 1,
                            .row_stride = shape.row_stride,
                            .tokens = no_tokens,
                            .sampled_tokens = sampled,
                            .logit_row_offsets = one_row,
                            .token_row_offsets = no_token_rows,
                            .lp_output_offsets = one_row,
                            .temperatures = std::nullopt};
    const std::string shown = std::to_string(shape.rows) + " * " + std::to_string(shape.row_stride);
    try {
      validate_batch(batch, 0);
      ADD_FAILURE() << shown << " was accepted";
    } catch (const InvalidBatch& e) {
      EXPECT_NE(std::string(e.what()).find("overflows the address space"), std::string::npos) << e.what();
    }
    for (const Backend* backend : all_backends()) {
      ResultData out(1, 1);
      EXPECT_THROW(backend->run(batch, 0, out.view()), InvalidBatch) << backend->name() << ", " << shown;
    }
  }
}

}  // namespace
}  // namespace logprobs
