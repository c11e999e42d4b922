// The reference's sum of exponentials, built once per SIMD target (reference/CMakeLists.txt:
// LOGPROBS_EXP_SUM_TARGET names it, its flags choose Eigen's packets), and exp_sum_dispatch.cpp
// calls the best one the CPU runs.
//
// The order is fixed, whatever the vector width: four running sums, sum l taking the x_j with
// j = l mod 4 in index order up to the last multiple of 4; then s0 + s2 and s1 + s3, to which the
// next two entries are added when two or three are left; those two added; and the last entry
// added when n is odd. Every exponential is Eigen's vectorized exp (pexp), but that of an odd
// last entry, which is std::exp. This is exactly the sum that Eigen's reduction
// `(x - m).exp().sum()` made on SSE2 (two accumulators of two doubles), the reference's sum since
// version 1, so the reference's bits did not change when it became fast; and they are the same on
// every target, since pexp is the same IEEE operations lane by lane at any width when no
// multiply-add is fused: no target here enables FMA (which is why AVX-512, for which Eigen
// requires FMA, is not one), and the build contracts none (-ffp-contract=off).
//
// Eigen's namespace is renamed per target: the inline functions each build instantiates then
// have names of their own, so the linker cannot hand a baseline caller the AVX2 copy of one
// (ctest reference_target_symbols checks that each target's object defines no other shared symbol).
#include <cmath>
#include <cstdint>

#if defined(__FMA__)
#error "exp_sum.cpp is built without FMA: a fused multiply-add in Eigen's exp changes the reference's bits"
#endif

#define LOGPROBS_PASTE2(a, b) a##_##b
#define LOGPROBS_PASTE(a, b) LOGPROBS_PASTE2(a, b)
#define Eigen LOGPROBS_PASTE(Eigen, LOGPROBS_EXP_SUM_TARGET)
#include <Eigen/Core>

namespace logprobs::exp_sum_targets::LOGPROBS_EXP_SUM_TARGET {

double sum_of_exponentials(const float* x, std::uint64_t n, double m) {
  using namespace Eigen::internal;
  using Packet = packet_traits<double>::type;
  constexpr int kWidth = unpacket_traits<Packet>::size;  // 2 (SSE2) or 4 (AVX2)
  constexpr int kPackets = 4 / kWidth;                   // packets holding the four running sums
  static_assert(kPackets * kWidth == 4);

  Packet sums[kPackets];
  for (Packet& p : sums) p = pset1<Packet>(0.0);  // 0 + e is e: as if the sums started at x_0..x_3
  // x_j - m in double, a block at a time through an aligned buffer (pload), then exponentiated.
  constexpr std::uint64_t kBlock = 256;
  alignas(64) double shifted[kBlock];
  const std::uint64_t whole = n / 4 * 4;
  for (std::uint64_t begin = 0; begin < whole; begin += kBlock) {
    const std::uint64_t size = whole - begin < kBlock ? whole - begin : kBlock;
    for (std::uint64_t j = 0; j < size; ++j) shifted[j] = double(x[begin + j]) - m;
    for (std::uint64_t j = 0; j < size; j += 4)
      for (int p = 0; p < kPackets; ++p) sums[p] = padd(sums[p], pexp(pload<Packet>(shifted + j + p * kWidth)));
  }
  alignas(64) double lane[4];
  for (int p = 0; p < kPackets; ++p) pstore(lane + p * kWidth, sums[p]);
  double even = lane[0] + lane[2], odd = lane[1] + lane[3];
  std::uint64_t j = whole;
  if (n - whole >= 2) {  // the pair after the last multiple of 4, exponentiated in one packet
    alignas(64) double pair[kWidth] = {double(x[j]) - m, double(x[j + 1]) - m};
    alignas(64) double e[kWidth];
    pstore(e, pexp(pload<Packet>(pair)));
    even += e[0];
    odd += e[1];
    j += 2;
  }
  double sum = even + odd;
  if (j < n) sum += std::exp(double(x[j]) - m);
  return sum;
}

void rounded_exponentials(const float* x, std::uint64_t n, double m, float* e) {
  using namespace Eigen::internal;
  using Packet = packet_traits<double>::type;
  constexpr std::uint64_t kWidth = unpacket_traits<Packet>::size;
  constexpr std::uint64_t kBlock = 256;
  alignas(64) double shifted[kBlock];
  for (std::uint64_t begin = 0; begin < n; begin += kBlock) {
    const std::uint64_t size = n - begin < kBlock ? n - begin : kBlock;
    const std::uint64_t packets = (size + kWidth - 1) / kWidth * kWidth;
    for (std::uint64_t j = 0; j < size; ++j) shifted[j] = double(x[begin + j]) - m;
    for (std::uint64_t j = size; j < packets; ++j) shifted[j] = 0;  // the last packet's spare lanes
    for (std::uint64_t j = 0; j < packets; j += kWidth) pstore(shifted + j, pexp(pload<Packet>(shifted + j)));
    for (std::uint64_t j = 0; j < size; ++j) e[begin + j] = static_cast<float>(shifted[j]);
  }
}

}  // namespace logprobs::exp_sum_targets::LOGPROBS_EXP_SUM_TARGET
