// The canonical arithmetic's exp and combine (logprobs/canonical_arithmetic.hpp) lane by lane,
// per Highway target (included by row_kernel.cpp inside its per-target namespace; Highway's -inl.h
// convention: re-included once per target). Each operation is the scalar definition's, in the
// same order, so every lane gives the definition's bits on every target; the test
// (test_cpu_backend.cpp) compares them bit for bit.
//
// Why these are not Highway's MulAdd or Exp: on SSE4 and SSSE3 MulAdd is a multiply then an add,
// two roundings where the definition has one (a fused multiply-add), and Highway's Exp is another
// function altogether. Fma() below is the instruction where the target has it and std::fma (a
// correctly rounded fused multiply-add) lane by lane where it does not: slow, but those targets
// exist to run the same arithmetic on old CPUs, not to be fast.

#if defined(LOGPROBS_CPU_CANONICAL_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LOGPROBS_CPU_CANONICAL_EXP_INL_H_
#undef LOGPROBS_CPU_CANONICAL_EXP_INL_H_
#else
#define LOGPROBS_CPU_CANONICAL_EXP_INL_H_
#endif

#include <cmath>

#include "hwy/highway.h"
#include "logprobs/canonical_arithmetic.hpp"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
inline constexpr bool kNativeFma = false;
#else
inline constexpr bool kNativeFma = true;
#endif

// a * b + c, rounded once.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Fma(D d, V a, V b, V c) {
  if constexpr (kNativeFma) {
    return hn::MulAdd(a, b, c);
  } else {
    constexpr std::size_t kMax = hn::MaxLanes(D());
    HWY_ALIGN float la[kMax], lb[kMax], lc[kMax];
    hn::Store(a, d, la);
    hn::Store(b, d, lb);
    hn::Store(c, d, lc);
    for (std::size_t i = 0; i < hn::Lanes(d); ++i) la[i] = std::fma(la[i], lb[i], lc[i]);
    return hn::Load(d, la);
  }
}

// -(a * b) + c, rounded once (the same as fma(-a, b, c): negation is exact).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V NegFma(D d, V a, V b, V c) {
  if constexpr (kNativeFma) return hn::NegMulAdd(a, b, c);
  return Fma(d, hn::Neg(a), b, c);
}

// canonical::exp_f32, lane by lane. kInRange: the caller knows every x >= kExpFloor (so not NaN
// or -inf), where the definition's selection of 0 below the range would select nothing.
template <bool kInRange = false, class D, class V = hn::Vec<D>>
HWY_INLINE V CanonicalExp(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V shifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
  const V t = Fma(d, x, hn::Set(d, 1.44269504088896341f), shifter);
  const V n = hn::Sub(t, shifter);
  V r = NegFma(d, n, hn::Set(d, 0.693145751953125f), x);
  r = NegFma(d, n, hn::Set(d, 1.428606765330187045e-6f), r);
  V q = hn::Set(d, 0.0013926175888627768f);
  q = Fma(d, q, r, hn::Set(d, 0.008363173343241215f));
  q = Fma(d, q, r, hn::Set(d, 0.041666556149721146f));
  q = Fma(d, q, r, hn::Set(d, 0.16666577756404877f));
  q = Fma(d, q, r, hn::Set(d, 0.5f));
  const V one = hn::Set(d, 1.0f);
  const V p = Fma(d, Fma(d, q, r, one), r, one);
  // t's low mantissa bits hold n (two's complement), so t's bits << 23 are n << 23.
  const V scaled = hn::BitCast(d, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, t))));
  if constexpr (kInRange) return scaled;
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, canonical::kExpFloor)), scaled);
}

// canonical::combine of lanes (a_max, a_sum) and (b_max, b_sum), lane by lane: the same branch
// taken per lane by selection.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void CanonicalCombine(D d, V& a_max, V& a_sum, V b_max, V b_sum) {
  const auto equal = hn::Eq(a_max, b_max);
  const auto a_above = hn::Gt(a_max, b_max);
  const V top = hn::IfThenElse(a_above, a_max, b_max);
  const V low_max = hn::IfThenElse(a_above, b_max, a_max);
  const V low_sum = hn::IfThenElse(a_above, b_sum, a_sum);
  const V top_sum = hn::IfThenElse(a_above, a_sum, b_sum);
  const V scaled = Fma(d, low_sum, CanonicalExp(d, hn::Sub(low_max, top)), top_sum);
  a_sum = hn::IfThenElse(equal, hn::Add(a_sum, b_sum), scaled);
  a_max = hn::IfThenElse(equal, a_max, top);
}

// canonical::pairwise_tree over parts[0, count), one pair a lane at a time.
HWY_INLINE canonical::Partial CanonicalTree(canonical::Partial* parts, std::uint64_t count) {
  const hn::CappedTag<float, 1> d1;
  while (count > 1) {
    for (std::uint64_t i = 0; i < count / 2; ++i) {
      auto max = hn::Set(d1, parts[2 * i].max), sum = hn::Set(d1, parts[2 * i].sum);
      CanonicalCombine(d1, max, sum, hn::Set(d1, parts[2 * i + 1].max), hn::Set(d1, parts[2 * i + 1].sum));
      parts[i] = {hn::GetLane(max), hn::GetLane(sum)};
    }
    if (count % 2 == 1) parts[count / 2] = parts[count - 1];
    count = (count + 1) / 2;
  }
  return parts[0];
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::cpu
HWY_AFTER_NAMESPACE();

#endif  // LOGPROBS_CPU_CANONICAL_EXP_INL_H_
