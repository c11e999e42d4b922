// exp(x) for the terms of a softmax sum, per Highway target (included by row_kernel.cpp inside
// its per-target namespace; Highway's -inl.h convention: re-included once per target).
//
// Why not hwy::Exp: it is general (full f32 range, round-toward-zero conversion with overflow
// fix-up, Estrin with extra multiplies, a two-multiply rescale for large |x|) and costs about 28
// vector operations, and with it the softmax pass was bound by exp rather than by memory. Here
// the arguments are x - ref <= kRefMargin (64, see row_kernel.cpp) and anything below kExpFloor
// adds nothing to a sum that holds a term >= 1, so 14 operations suffice:
//   - n = round(x / ln2) by the shifter trick: adding 1.5 * 2^23 rounds to an integer held in the
//     low mantissa bits;
//   - r = x - n ln2 in two FMAs with ln2 split in a short head and a tail (Cody and Waite: n times
//     the head is exact, so r keeps its low bits);
//   - exp(r) = 1 + r + r^2 Q(r) on |r| <= ln2/2, Q of degree 4 (a Chebyshev fit to
//     (e^r - 1 - r) / r^2 made with mpmath, fit error 1e-8 = 0.16 ulp), by Horner;
//   - 2^n added to the exponent bits as n << 23. For x in [kExpFloor, 64], n is in [-124, 93] and
//     the result's exponent stays normal, so the integer add is exact.
//
// Error bound, tested on every target in optimized/cpu/test_cpu_backend.cpp against std::exp in double:
// at most 2 f32 ulp relative over [kExpFloor, 64]. Out of range: 0 for x < kExpFloor, for -inf
// and for NaN (the kernel records NaN and +inf itself, SPEC §3); x > 64 never occurs.

#if defined(LOGPROBS_CPU_SOFTMAX_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LOGPROBS_CPU_SOFTMAX_EXP_INL_H_
#undef LOGPROBS_CPU_SOFTMAX_EXP_INL_H_
#else
#define LOGPROBS_CPU_SOFTMAX_EXP_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Below it, exp(x) < 4.5e-38: under one f32 ulp of any sum that holds a term >= 1.
constexpr float kExpFloor = -86.0f;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V SoftmaxExp(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V shifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
  const V t = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), shifter);
  const V n = hn::Sub(t, shifter);
  // ln2 = 0.693145751953125 (15 significant bits: n * head is exact for |n| < 2^9) + tail.
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187045e-6f), r);

  V q = hn::Set(d, 0.0013926175888627768f);
  q = hn::MulAdd(q, r, hn::Set(d, 0.008363173343241215f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.041666556149721146f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.16666577756404877f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.5f));
  const V one = hn::Set(d, 1.0f);
  const V p = hn::MulAdd(hn::MulAdd(q, r, one), r, one);  // 1 + r + r^2 q

  // t's low mantissa bits hold n (two's complement), so t's bits << 23 are n << 23.
  const auto scaled = hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, t)));
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, kExpFloor)), hn::BitCast(d, scaled));
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::cpu
HWY_AFTER_NAMESPACE();

#endif  // LOGPROBS_CPU_SOFTMAX_EXP_INL_H_
