// SPEC §8's canonical arithmetic (logprobs/canonical_arithmetic.hpp) on its own: the accuracy of
// its exp and log, the combine's special cases, the claim that a row's groups of 16 segments
// reduce apart and then together to the very tree over all its segments, and the `canonical`
// backend against the reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "harness/comparator.hpp"
#include "harness/judge.hpp"
#include "logprobs/canonical_arithmetic.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The exp's error bound over the range the sum uses, [kExpFloor, 0]: every 97th f32 there (11.5
// million of them; every f32 there, 1.1 billion, gave 3.8927 ulp at -49.9664612, which this sample
// finds to within 0.09), against exp in long double. The bound grows with |x| (the one-step
// reduction's error is proportional to k), so the figure sits at the floor.
TEST(CanonicalArithmetic, ExpIsWithinFourUlpOnItsDomainAndZeroOutsideIt) {
  double worst = 0;
  for (std::uint32_t bits = std::bit_cast<std::uint32_t>(-0.0f);
       bits <= std::bit_cast<std::uint32_t>(canonical::kExpFloor); bits += 97) {
    const float x = std::bit_cast<float>(bits);
    const long double exact = std::exp(static_cast<long double>(x));
    const double error = double(std::fabs(static_cast<long double>(canonical::exp_f32(x)) - exact));
    worst = std::max(worst, error / ulp_f32(float(exact)));
  }
  EXPECT_LE(worst, 4.0);
  EXPECT_GE(worst, 3.75) << "the measured bound moved: update canonical_arithmetic.hpp's figure";
  RecordProperty("worst_ulps", std::to_string(worst));
  EXPECT_EQ(canonical::exp_f32(0.0f), 1.0f) << "a segment's max contributes exactly 1";
  EXPECT_EQ(canonical::exp_f32(-0.0f), 1.0f);
  EXPECT_GE(canonical::exp_f32(canonical::kExpFloor), std::numeric_limits<float>::min()) << "normal at the floor";
  EXPECT_EQ(canonical::exp_f32(std::nextafter(canonical::kExpFloor, -kInf)), 0.0f);
  EXPECT_EQ(canonical::exp_f32(-kInf), 0.0f);
  EXPECT_EQ(canonical::exp_f32(std::numeric_limits<float>::quiet_NaN()), 0.0f);
}

// Every table entry is 2^(j / 32) rounded to nearest: within half an ulp, in long double.
TEST(CanonicalArithmetic, ExpTableIsTwoToTheJOver32) {
  for (int j = 0; j < canonical::kExp2TableSize; ++j) {
    const float entry = canonical::float_of(canonical::kExp2Table[j]);
    const long double exact = std::exp2(static_cast<long double>(j) / 32);
    EXPECT_LE(std::fabs(static_cast<long double>(entry) - exact), 0.5L * std::ldexp(1.0L, -23)) << j;
  }
}

TEST(CanonicalArithmetic, LogIsNearlyExactOverEverySum) {
  std::mt19937_64 rng(5);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double s = std::ldexp(1.0 + std::uniform_real_distribution<double>(0, 1)(rng), int(rng() % 33));
    worst = std::max(worst, std::fabs(canonical::log_f64(s) - std::log(s)) / std::log(s + 1));
  }
  EXPECT_EQ(canonical::log_f64(1.0), 0.0);
  EXPECT_LT(worst, 1e-15);
}

TEST(CanonicalArithmetic, CombineHandlesEqualMaximaAndEmptyParts) {
  const canonical::Partial empty;  // (-inf, 0)
  EXPECT_EQ(canonical::combine(empty, empty).sum, 0.0f) << "never exp(-inf - -inf)";
  const canonical::Partial a{2.0f, 3.0f}, b{2.0f, 0.5f}, c{-1.0f, 1.0f};
  EXPECT_EQ(canonical::combine(a, b).sum, 3.5f);
  EXPECT_EQ(canonical::combine(a, empty).sum, 3.0f);
  EXPECT_EQ(canonical::combine(empty, a).max, 2.0f);
  const canonical::Partial ac = canonical::combine(a, c), ca = canonical::combine(c, a);
  EXPECT_EQ(ac.max, 2.0f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(ac.sum), std::bit_cast<std::uint32_t>(ca.sum)) << "commutative";
  EXPECT_NEAR(ac.sum, 3.0 + std::exp(-3.0), 1e-6);
}

// canonical_arithmetic.hpp's claim: cut into groups of 16 from the start, the pairwise tree over
// all segments is the tree over the groups' trees, for every count (so chunks reduce apart).
TEST(CanonicalArithmetic, GroupsOf16ReduceApartToTheSameTree) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 20.0f);
  for (std::uint64_t count = 1; count <= 300; ++count) {
    std::vector<canonical::Partial> parts(count);
    for (auto& p : parts) p = {normal(rng), 1.0f + std::fabs(normal(rng))};
    std::vector<canonical::Partial> all = parts, groups;
    for (std::uint64_t g = 0; g < count; g += canonical::kGroupSegments) {
      std::vector<canonical::Partial> group(parts.begin() + std::ptrdiff_t(g),
                                            parts.begin() + std::ptrdiff_t(std::min(count, g + 16)));
      groups.push_back(canonical::pairwise_tree(group.data(), group.size()));
    }
    const canonical::Partial whole = canonical::pairwise_tree(all.data(), count);
    const canonical::Partial grouped = canonical::pairwise_tree(groups.data(), groups.size());
    ASSERT_EQ(std::bit_cast<std::uint32_t>(whole.sum), std::bit_cast<std::uint32_t>(grouped.sum)) << count;
    ASSERT_EQ(whole.max, grouped.max) << count;
  }
}

// The row statistics against double precision, on rows of one dominant logit and a flat sea far
// below it (each term under half an ulp of a running sum) at LLM vocabulary sizes: the pairwise
// tree keeps the error within SPEC §5's sqrt(V) summation term.
TEST(CanonicalArithmetic, TheRowSumIsWellWithinTheDefaultTolerance) {
  for (const std::uint64_t vocab : {32000ull, 128256ull, 152064ull, 262144ull}) {
    std::vector<float> x(vocab, -16.6f);
    x[vocab / 3] = 0.0f;
    std::vector<canonical::Partial> parts(vocab / canonical::kSegment + 1);
    std::uint32_t flags = 0;
    const double n = canonical::normalizer(canonical::row_partial(x.data(), vocab, flags, parts.data()), flags);
    const double exact = -std::log(1.0 + double(vocab - 1) * std::exp(-16.6));
    EXPECT_LT(std::fabs(n - exact), 0.1 * 2 * std::sqrt(double(vocab)) * std::ldexp(1.0, -24)) << vocab;
  }
}

TEST(CanonicalBackend, ClaimsSpec8AndEveryPartAndAgreesWithTheReference) {
  const Backend* canonical = find_backend(kCanonicalName);
  ASSERT_NE(canonical, nullptr);
  EXPECT_TRUE(canonical->claims_canonical_arithmetic());
  EXPECT_EQ(missing_part(canonical->features(), BatchData{}.view(), 5, true), "");
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(40000);
  for (float& v : x) v = normal(rng);
  x[17] = -kInf;
  const BatchData batch = single_row_batch(x, 17);
  const ResultData got = run_backend(*canonical, batch, 20, /*ranks=*/true);
  const Verdict verdict = judge_against_reference(batch, 20, got);
  EXPECT_TRUE(verdict.ok()) << verdict.violations.front().message();
  EXPECT_EQ(got.lp_ranks[0], 40000u) << "x_s = -inf: every entry, itself included, is >= it";
  for (std::uint64_t slot = 1; slot < 20; ++slot)
    EXPECT_LT(got.token(0, slot - 1), got.token(0, slot)) << "token order";
}

}  // namespace
}  // namespace logprobs
