// Which build of exp_sum.cpp this CPU runs: the widest of reference/CMakeLists.txt's targets that
// it supports. Every build gives the same bits (exp_sum.cpp), so the choice changes only the time.
#include "exp_sum.hpp"

namespace logprobs {
namespace exp_sum_targets {
namespace baseline {
double sum_of_exponentials(const float* x, std::uint64_t n, double m);
void rounded_exponentials(const float* x, std::uint64_t n, double m, float* e);
}
#if LOGPROBS_EXP_SUM_AVX2
namespace avx2 {
double sum_of_exponentials(const float* x, std::uint64_t n, double m);
void rounded_exponentials(const float* x, std::uint64_t n, double m, float* e);
}
#endif
}  // namespace exp_sum_targets

std::span<const ExpSumTarget> exp_sum_builds() {
  static const ExpSumTarget builds[] = {
#if LOGPROBS_EXP_SUM_AVX2
      {"avx2", exp_sum_targets::avx2::sum_of_exponentials, exp_sum_targets::avx2::rounded_exponentials,
       __builtin_cpu_supports("avx2") != 0},
#endif
      {"baseline", exp_sum_targets::baseline::sum_of_exponentials, exp_sum_targets::baseline::rounded_exponentials,
       true},
  };
  return builds;
}

// The widest build this CPU runs (the baseline runs everywhere).
static const ExpSumTarget& chosen_build() {
  static const ExpSumTarget& chosen = []() -> const ExpSumTarget& {
    for (const ExpSumTarget& build : exp_sum_builds())
      if (build.runs_here) return build;
    return exp_sum_builds().back();
  }();
  return chosen;
}

double sum_of_exponentials(const float* x, std::uint64_t n, double m) { return chosen_build().sum(x, n, m); }

void rounded_exponentials(const float* x, std::uint64_t n, double m, float* e) {
  chosen_build().exponentials(x, n, m, e);
}

}  // namespace logprobs
