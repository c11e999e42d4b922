// The reference's sum of exponentials: every build of exp_sum.cpp that this CPU runs gives the
// baseline's bits, and the baseline's are those of the Eigen expression the reference summed with
// before it had its own loop, on rows of every length around the 4-entry groups and the 256-entry
// blocks, with masked (-inf), +inf and NaN entries.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "exp_sum.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Row {
  std::vector<float> x;
  double m;
};

// Rows of each length in `lengths`, logits of spread `scale`; every `special`-th entry (when
// special > 0) replaced by `value`.
std::vector<Row> rows(const std::vector<std::uint64_t>& lengths, float scale, int special, float value) {
  std::mt19937 random(std::uint32_t(lengths.size() * 31 + special));
  std::normal_distribution<float> logit(0.0f, scale);
  std::vector<Row> out;
  for (const std::uint64_t n : lengths) {
    Row row{std::vector<float>(n), -std::numeric_limits<double>::infinity()};
    for (std::uint64_t j = 0; j < n; ++j) row.x[j] = special > 0 && j % special == 1 ? value : logit(random);
    for (const float v : row.x) row.m = std::max(row.m, double(v));  // NaN never wins
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<Row> all_rows() {
  std::vector<std::uint64_t> lengths;
  for (std::uint64_t n = 1; n <= 300; ++n) lengths.push_back(n);
  for (const std::uint64_t n : {511, 512, 513, 1023, 1024, 1025, 32000, 128256, 152064}) lengths.push_back(n);
  std::vector<Row> out;
  for (const auto& [scale, special, value] : {std::tuple{1.0f, 0, 0.0f}, std::tuple{8.0f, 0, 0.0f},
                                               std::tuple{30.0f, 0, 0.0f}, std::tuple{2.0f, 3, -kInf},
                                               std::tuple{2.0f, 7, kInf}, std::tuple{2.0f, 5, std::nanf("")}}) {
    std::vector<Row> some = rows(lengths, scale, special, value);
    out.insert(out.end(), some.begin(), some.end());
  }
  return out;
}

TEST(ExpSum, EveryBuildGivesTheBaselinesBits) {
  const std::vector<Row> tested = all_rows();
  const std::span<const ExpSumTarget> builds = exp_sum_builds();
  const ExpSumTarget& baseline = builds.back();
  ASSERT_STREQ(baseline.name, "baseline");
  for (const ExpSumTarget& build : builds) {
    if (!build.runs_here) {
      std::printf("not run: this CPU lacks %s\n", build.name);
      continue;
    }
    for (const Row& row : tested) {
      const double want = baseline.sum(row.x.data(), row.x.size(), row.m);
      const double got = build.sum(row.x.data(), row.x.size(), row.m);
      ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want))
          << build.name << " at V = " << row.x.size() << ": " << got << " vs " << want;
    }
  }
}

// SPEC §5's e_j: each build's rounded exponentials are the baseline's bits, and each is exp(x_j - m)
// rounded to f32 but for the rare entry whose exact value lies within pexp's error of an f32
// rounding boundary, one f32 ulp away.
TEST(ExpSum, RoundedExponentialsAreTheSameOnEveryBuildAndAreExp) {
  const std::vector<Row> tested = all_rows();
  const std::span<const ExpSumTarget> builds = exp_sum_builds();
  std::uint64_t entries = 0, one_ulp = 0;
  for (const Row& row : tested) {
    if (!std::isfinite(row.m)) continue;
    std::vector<float> want(row.x.size());
    builds.back().exponentials(row.x.data(), row.x.size(), row.m, want.data());
    for (std::uint64_t j = 0; j < row.x.size(); ++j) {
      if (std::isnan(row.x[j]) || row.x[j] == kInf) continue;  // rows the calibration never sums
      const float libm = static_cast<float>(std::exp(double(row.x[j]) - row.m));
      const std::int64_t apart = std::int64_t(std::bit_cast<std::uint32_t>(want[j])) -
                                 std::int64_t(std::bit_cast<std::uint32_t>(libm));
      ASSERT_LE(std::abs(apart), 1) << "x = " << row.x[j] << ", m = " << row.m;
      ++entries;
      one_ulp += apart != 0;
    }
    for (const ExpSumTarget& build : builds) {
      if (!build.runs_here) continue;
      std::vector<float> got(row.x.size());
      build.exponentials(row.x.data(), row.x.size(), row.m, got.data());
      for (std::uint64_t j = 0; j < row.x.size(); ++j)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[j]), std::bit_cast<std::uint32_t>(want[j]))
            << build.name << " at V = " << row.x.size() << ", entry " << j;
    }
  }
  EXPECT_LT(one_ulp * 100000, entries) << one_ulp << " of " << entries << " entries one ulp from the C library's";
}

// Before exp_sum.cpp the reference summed with this expression, compiled for SSE2 (as this test
// is, unless the build's flags ask for more), whose reduction order exp_sum.cpp writes out.
TEST(ExpSum, BaselineIsTheEigenExpressionOnSse2) {
#if defined(EIGEN_VECTORIZE_AVX) || !defined(EIGEN_VECTORIZE_SSE2)
  GTEST_SKIP() << "this test is not built for SSE2 alone, so Eigen's reduction here has another order";
#else
  for (const Row& row : all_rows()) {
    const Eigen::ArrayXd x = Eigen::Map<const Eigen::ArrayXf>(row.x.data(), Eigen::Index(row.x.size())).cast<double>();
    const double want = (x - row.m).exp().sum();
    const double got = sum_of_exponentials(row.x.data(), row.x.size(), row.m);
    ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want))
        << "V = " << row.x.size() << ": " << got << " vs " << want;
  }
#endif
}

}  // namespace
}  // namespace logprobs
