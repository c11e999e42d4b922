// The small shapes that ci/gpu-check runs under compute-sanitizer (memcheck, racecheck,
// synccheck), part of test_cuda_backend and selected by its filter 'GpuCheckSanitizerShapes/*'
// (rename both together): V in {37, 8193, 20000} (inside one chunk of 8192, one past it, several
// chunks) x K in {0, 7, 255, 256, 65535} x a 16-byte-aligned and an odd row stride (for
// V = 20000 the aligned stride is V). Each case is a ragged batch (an item of two rows with an
// echo token, an empty item, an item of one row) judged against the reference, with ranks and
// temperatures when the backend declares them. Skips without a device, and for a K the backend
// does not implement (SPEC §4), saying which; on a GPU machine the script counts every skip as a
// failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "harness/judge.hpp"
#include "tests/verdict_assertion.hpp"

namespace logprobs {
namespace {

struct SanitizerShape {
  std::uint64_t vocab;
  std::uint32_t k;
  bool odd_stride;
};

// Aligned: the first multiple of 4 floats at or above V. Odd: an odd stride above V, so that
// every other row starts off a 16-byte boundary.
std::uint64_t stride_of(const SanitizerShape& s) { return s.odd_stride ? (s.vocab + 1) | 1 : (s.vocab + 3) / 4 * 4; }

// "V8193_K255_odd": the test's name, and where a failure happened.
std::string shape_name(const SanitizerShape& s) {
  std::string name = "V";
  name += std::to_string(s.vocab);
  name += "_K";
  name += std::to_string(s.k);
  name += s.odd_stride ? "_odd" : "_aligned";
  return name;
}

void PrintTo(const SanitizerShape& s, std::ostream* os) { *os << shape_name(s); }

BatchData sanitizer_batch(const SanitizerShape& s, bool temperatures) {
  std::mt19937 rng(std::uint32_t(s.vocab * 131 + s.k * 2 + s.odd_stride));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  BatchData b;
  b.vocab = s.vocab;
  b.row_stride = stride_of(s);
  b.rows = 3;
  b.logit_row_offsets = {0, 2, 2, 3};
  b.lp_output_offsets = {0, 2, 2, 3};
  b.token_row_offsets = {0, 1, 1, 1};
  b.tokens = {std::uint32_t(rng() % s.vocab)};
  for (int i = 0; i < 3; ++i) b.sampled_tokens.push_back(std::uint32_t(rng() % s.vocab));
  if (temperatures) b.temperatures = std::vector<float>{0.7f, 1.0f, 1.5f};
  // The gap past V holds a value no row may read: read, it would top every row.
  b.logits.assign(b.rows * b.row_stride, 1e30f);
  for (std::uint64_t j = 0; j < s.vocab; ++j) {
    b.row(0)[j] = normal(rng);
    b.row(1)[j] = rng() % 4 == 0 ? -std::numeric_limits<float>::infinity() : std::round(normal(rng));  // ties, masks
    b.row(2)[j] = normal(rng) * 100.0f;
  }
  return b;
}

// `backend` on the shape's batch, with ranks and temperatures when it declares them, judged
// against the reference and, when it claims SPEC §8, against the canonical bits.
void judge_on_shape(const Backend& backend, const SanitizerShape& s) {
  const Features features = backend.features();
  const bool ranks = features.ranks;
  const BatchData batch = sanitizer_batch(s, features.temperatures);
  if (const std::string part = missing_part(features, batch.view(), s.k, ranks); !part.empty())
    GTEST_SKIP() << "backend " << backend.name() << " does not implement " << part;
  const Backend* const claimant[] = {&backend};
  const ResultData reference = run_backend(reference_backend(), batch, s.k, ranks);
  const std::optional<ResultData> canonical = canonical_result(claimant, batch, s.k, ranks);
  const BackendOutcome outcome =
      judge_backend(backend, batch, s.k, ranks, reference, {}, canonical ? &*canonical : nullptr);
  const std::string where = std::string(backend.name()) + " on " + shape_name(s) + " (stride " +
                            std::to_string(stride_of(s)) + (ranks ? ", ranks)" : ")");
  ASSERT_TRUE(outcome.error.empty()) << where << ": " << outcome.error;
  EXPECT_TRUE(testing_support::agrees(outcome.verdict)) << where;
  EXPECT_EQ(outcome.canonical_difference, "") << where;
}

std::vector<SanitizerShape> sanitizer_shapes();

class GpuCheckSanitizerShape : public ::testing::TestWithParam<SanitizerShape> {};

TEST_P(GpuCheckSanitizerShape, AgreesWithTheReference) {
  const Backend* cuda = find_backend("cuda");
  ASSERT_NE(cuda, nullptr) << "backend cuda is not registered";
  if (const Availability a = cuda->availability(); !a.available)
    GTEST_SKIP() << "backend cuda unavailable here: " << a.reason;
  judge_on_shape(*cuda, GetParam());
}

// Here too (not matched by the filter): the strides are what they say, and the cpu backend,
// with every optional part, agrees on every batch, so a failure on the device is the device's.
TEST(GpuCheckSanitizerShapesOnHost, StridesAsNamedAndTheCpuBackendAgrees) {
  const Backend* cpu = find_backend("cpu");
  ASSERT_NE(cpu, nullptr) << "backend cpu is not registered";
  for (const SanitizerShape& s : sanitizer_shapes()) {
    const std::uint64_t stride = stride_of(s);
    EXPECT_TRUE(s.odd_stride ? stride > s.vocab && stride % 2 == 1 : stride >= s.vocab && stride % 4 == 0)
        << shape_name(s);
    judge_on_shape(*cpu, s);
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

std::vector<SanitizerShape> sanitizer_shapes() {
  std::vector<SanitizerShape> all;
  for (const std::uint64_t vocab : {37u, 8193u, 20000u})
    for (const std::uint32_t k : {0u, 7u, 255u, 256u, 65535u})
      for (const bool odd : {false, true}) all.push_back({vocab, k, odd});
  return all;
}

INSTANTIATE_TEST_SUITE_P(GpuCheckSanitizerShapes, GpuCheckSanitizerShape, ::testing::ValuesIn(sanitizer_shapes()),
                         [](const ::testing::TestParamInfo<SanitizerShape>& info) { return shape_name(info.param); });

}  // namespace
}  // namespace logprobs
