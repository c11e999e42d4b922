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

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "logprobs/canonical_arithmetic.hpp"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// LOGPROBS_CPU_STEP: how row_kernel.cpp's ChunkScanner inlines its steps. Forced inline where the
// fma is an instruction (ChunkScanner's comment says why); out of line where it is not, which
// makes the target slow anyway: forced into run(), each of those targets' runs was one function so
// large that the sanitizer builds spent most of their time on it (row_kernel.cpp with ci/fuzz's
// flags, clang 14: 560 -> 140 s, 430 of the 560 on EMU128's runs; with the asan preset's, GCC 12:
// 338 -> 163 s).
#undef LOGPROBS_CPU_STEP
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
inline constexpr bool kNativeFma = false;
#define LOGPROBS_CPU_STEP HWY_NOINLINE
#else
inline constexpr bool kNativeFma = true;
#define LOGPROBS_CPU_STEP HWY_INLINE
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

// canonical::exp_f32's table, held in registers where the target has a permute of 32 entries
// (AVX-512: one vpermt2d over two registers; AVX2: four vpermd and two blends) and read lane by
// lane elsewhere (SSE4, SSSE3 and the fallbacks, which compute each fma lane by lane anyway), and
// the exp's last step: 2^(k / 32) (1 + s), that is the scaled entry T = 2^(k >> 5) table[k & 31]
// and fma(T, s, T).
//
// How 2^(k >> 5) is applied:
// - On AVX-512 (16 lanes), after the fma, by vscalefps: the reduction then runs in units of 1/32
//   (kUnit), its t = 1.5 * 2^18 + k / 32 and kf = k / 32, every constant scaled by 2^-5 (exact), so
//   every rounding is the definition's scaled by 2^-5 (t stays normal): the same k, the same r, and
//   t's bits are still 0x48C00000 + k, whose low 5 bits index the table. vscalefps multiplies by
//   2^floor(kf) = 2^(k >> 5), exactly while the result is normal, which it is for every x >= -50
//   (k >> 5 >= -73 and fma(table[j], s, table[j]) >= 0.98), and that fma rounds as fma(T, s, T)
//   does but for the power of two. One operation where the integer shift and add are two: the
//   kernel 0.92-0.99x the time at 1 x 128256 f32, K = 0 to 255 (optimized/cpu/README.md). Every f32
//   in [-60, 88] was checked against the definition once, bit for bit (the test walks a sample).
// - Elsewhere, in the entry's exponent bits before the fma: each entry is stored less j << 18, so
//   that one shift and one add of t's bits give T. t's bits are 0x4B400000 + k (1.5 * 2^23 + k,
//   k >= -2308), and modulo 2^32 they shifted left by 18 are k << 18 (0x4B400000's lowest bit is
//   bit 22), which is ((k >> 5) << 23) + ((k & 31) << 18): the definition's 2^(k >> 5) in the
//   exponent bits, plus what the bias takes away. The permutes read only an index's low bits,
//   which are k & 31.
template <class D>
class Exp2Table {
  using DU = hn::RebindToUnsigned<D>;
  using VU = hn::Vec<DU>;
  using V = hn::Vec<D>;
  static constexpr std::size_t kN = hn::MaxLanes(D());
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
  static constexpr int kRegisters = kN == 16 ? 2 : 0;  // not for a capped tag's shorter vectors
  static constexpr bool kScalef = kN == 16;
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  static constexpr int kRegisters = kN == 8 ? 4 : 0;
  static constexpr bool kScalef = false;
#else
  static constexpr int kRegisters = 0;
  static constexpr bool kScalef = false;
#endif
  static constexpr auto kEntries = [] {
    std::array<std::uint32_t, canonical::kExp2TableSize> entries{};
    for (int j = 0; j < canonical::kExp2TableSize; ++j)
      entries[std::size_t(j)] = canonical::kExp2Table[j] - (kScalef ? 0u : std::uint32_t(j) << 18);
    return entries;
  }();
  static_assert(kRegisters == 0 || kRegisters * kN == canonical::kExp2TableSize,
                "the registers hold the table exactly");
  VU part_[kRegisters > 0 ? kRegisters : 1];

 public:
  // The reduction's unit: t = 1.5 * 2^23 kUnit + k kUnit, kf = k kUnit.
  static constexpr float kUnit = kScalef ? 1.0f / 32 : 1.0f;

  Exp2Table() {
    const DU du;
    if constexpr (kRegisters > 0) {
      alignas(64) static constexpr auto kTable = kEntries;
      for (int i = 0; i < kRegisters; ++i) part_[i] = hn::Load(du, kTable.data() + std::size_t(i) * kN);
    }
  }

  // 2^(k / 32) (1 + s), rounded once, for the reduction's t (its bits) and kf.
  HWY_INLINE V times_one_plus(VU t_bits, [[maybe_unused]] V kf, V s) const {
    const D d;
    const VU entry = lookup(t_bits);
    if constexpr (kScalef) {
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
      const V unscaled = hn::BitCast(d, entry);
      return V{_mm512_scalef_ps(Fma(d, unscaled, s, unscaled).raw, kf.raw)};
#endif
    } else {
      const V scaled = hn::BitCast(d, hn::Add(entry, hn::ShiftLeft<18>(t_bits)));
      return Fma(d, scaled, s, scaled);
    }
  }

 private:
  // kEntries[k & 31] for t's bits.
  HWY_INLINE VU lookup(VU t_bits) const {
    if constexpr (kRegisters == 0) {
      const DU du;
      HWY_ALIGN std::uint32_t lanes[kN];
      hn::Store(t_bits, du, lanes);
      for (std::size_t i = 0; i < hn::Lanes(du); ++i) lanes[i] = kEntries[lanes[i] & (canonical::kExp2TableSize - 1)];
      return hn::Load(du, lanes);
    } else {
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
      return VU{_mm512_permutex2var_epi32(part_[0].raw, t_bits.raw, part_[1].raw)};
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
      // Entry k & 31 of the four quarters' permutes, picked by k's bits 3 and 4 (moved to the sign).
      using VI = hn::Vec<hn::RebindToSigned<DU>>;
      const VI low{_mm256_permutevar8x32_epi32(part_[0].raw, t_bits.raw)};
      const VI mid{_mm256_permutevar8x32_epi32(part_[1].raw, t_bits.raw)};
      const VI high{_mm256_permutevar8x32_epi32(part_[2].raw, t_bits.raw)};
      const VI top{_mm256_permutevar8x32_epi32(part_[3].raw, t_bits.raw)};
      const VI bit3{hn::ShiftLeft<28>(t_bits).raw}, bit4{hn::ShiftLeft<27>(t_bits).raw};
      const VI upper = hn::IfNegativeThenElse(bit3, top, high), lower = hn::IfNegativeThenElse(bit3, mid, low);
      return VU{hn::IfNegativeThenElse(bit4, upper, lower).raw};
#endif
    }
  }
};

// What CanonicalExp does below kExpFloor. kDefinition: the definition's 0, for -inf and NaN too.
// kInRange: the caller knows every x >= kExpFloor, where that selection would select nothing.
// kNaNStays: 0 for x < kExpFloor but NaN for NaN, so that a sum of terms is NaN iff some x was;
// every other x gets the definition's bits.
enum class ExpDomain { kDefinition, kInRange, kNaNStays };

// canonical::exp_f32, lane by lane, in `kDomain`.
template <ExpDomain kDomain = ExpDomain::kDefinition, class D, class V = hn::Vec<D>>
HWY_INLINE V CanonicalExp(D d, V x, const Exp2Table<D>& table) {
  const hn::RebindToUnsigned<D> du;
  constexpr float kUnit = Exp2Table<D>::kUnit;        // its comment says why the unit changes no bit
  const V shifter = hn::Set(d, 12582912.0f * kUnit);  // 1.5 * 2^23 in the unit
  const V t = Fma(d, x, hn::Set(d, 46.1662413084468283f * kUnit), shifter);
  const V kf = hn::Sub(t, shifter);
  const V r = NegFma(d, kf, hn::Set(d, 0.021660849452018738f / kUnit), x);
  const V s = hn::Mul(r, Fma(d, hn::Set(d, 0.4999999701976776f), r, hn::Set(d, 1.0000146627426147f)));
  const V e = table.times_one_plus(hn::BitCast(du, t), kf, s);
  if constexpr (kDomain == ExpDomain::kInRange) return e;
  if constexpr (kDomain == ExpDomain::kNaNStays)
    return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, canonical::kExpFloor)), e);
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, canonical::kExpFloor)), e);
}

template <ExpDomain kDomain = ExpDomain::kDefinition, class D, class V = hn::Vec<D>>
HWY_INLINE V CanonicalExp(D d, V x) {
  return CanonicalExp<kDomain>(d, x, Exp2Table<D>());
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
