// S = sum over a row of exp(x_j - m), in double, in the reference's fixed order: the one loop of
// the reference whose speed the SIMD target decides (and the exponentials alone, for the
// harness's calibration), so exp_sum.cpp is built once per target and
// the CPU's best one is called (the order and every bit are the same on each: see exp_sum.cpp).
#pragma once

#include <cstdint>
#include <span>

namespace logprobs {

// x[0, n) widened to double, m subtracted, exponentiated and summed; n >= 1.
double sum_of_exponentials(const float* x, std::uint64_t n, double m);

// e[j] = exp(x[j] - m) in double, each by the same pexp as sum_of_exponentials, rounded once to
// f32, for j < n: SPEC §5's e_j, which the harness's calibration sums (harness/sum_calibration).
// Its bits are the same on every target, so a row's tolerance is the same on every machine.
void rounded_exponentials(const float* x, std::uint64_t n, double m, float* e);

// One build of exp_sum.cpp, widest first: what sum_of_exponentials picks from, and what the tests
// hold to the same bits.
struct ExpSumTarget {
  const char* name;
  double (*sum)(const float* x, std::uint64_t n, double m);
  void (*exponentials)(const float* x, std::uint64_t n, double m, float* e);
  bool runs_here;  // this CPU has the instructions it was built for
};
std::span<const ExpSumTarget> exp_sum_builds();

}  // namespace logprobs
