// Pass 1's steps on one tile and a segment's reductions, per Highway target (included by
// row_kernel.cpp; Highway's -inl.h convention: re-included once per target): a tile loaded and
// widened, its threshold test with the lanes' extremes, and a segment's largest and smallest lane
// and lane tree. It also defines the vector and the tile's shape that row_kernel.cpp's loops use
// (see the layout at the top of row_kernel.cpp). On AVX-512 (LOGPROBS_CPU_AVX512) some steps have
// instructions of their own; each says what it gained.

#if defined(LOGPROBS_CPU_TILE_STEPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LOGPROBS_CPU_TILE_STEPS_INL_H_
#undef LOGPROBS_CPU_TILE_STEPS_INL_H_
#else
#define LOGPROBS_CPU_TILE_STEPS_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "logprobs/batch.hpp"
#include "logprobs/canonical_arithmetic.hpp"
#include "row_kernel.hpp"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr std::size_t kN = hn::MaxLanes(D());
static_assert(canonical::kLanes % kN == 0, "a vector holds whole logical lanes");
constexpr std::size_t kRegs = canonical::kLanes / kN;            // vectors per step of a tile
constexpr std::size_t kTileVectors = canonical::kSteps * kRegs;  // vectors per tile
constexpr std::uint64_t kTile = canonical::kTile;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// f16 to f32 by integer operations (exact): Highway 1.0.3's emulation for targets without F16C
// turns infinities and NaN into finite values.
HWY_INLINE V WidenF16(hn::Vec<hn::RebindToUnsigned<D>> bits) {
  const D d;
  const hn::RebindToUnsigned<D> du;
  const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u)));
  const auto exponent = hn::And(hn::ShiftRight<10>(bits), hn::Set(du, 0x1fu));
  const auto mantissa = hn::And(bits, hn::Set(du, 0x3ffu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(du, 112u))), hn::ShiftLeft<13>(mantissa));
  const auto special = hn::Or(hn::Set(du, 0x7f800000u), hn::ShiftLeft<13>(mantissa));
  // A subnormal f16 is mantissa * 2^-24: exact as an f32 product.
  const auto subnormal =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(d, hn::BitCast(hn::RebindToSigned<D>(), mantissa)), hn::Set(d, 0x1p-24f)));
  const auto magnitude = hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), subnormal,
                                        hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x1fu)), special, normal));
  return hn::BitCast(d, hn::Or(sign, magnitude));
}

// Entries [i, i + kN) of a row of `kDtype` entries, widened exactly to f32 (SPEC §2.5).
template <LogitsDtype kDtype>
HWY_INLINE V LoadWidened(const std::byte* row, std::uint64_t i) {
  const D d;
  if constexpr (kDtype == LogitsDtype::f32) {
    return hn::LoadU(d, reinterpret_cast<const float*>(row) + i);
  } else {
    const hn::Rebind<std::uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const std::uint16_t*>(row) + i));
    if constexpr (kDtype == LogitsDtype::bf16) return hn::BitCast(d, hn::ShiftLeft<16>(bits));
    return WidenF16(bits);
  }
}

// True where the kernel is AVX-512's (16 lanes), which has its own instructions for a few steps.
#undef LOGPROBS_CPU_AVX512
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
#define LOGPROBS_CPU_AVX512 1
static_assert(kN == 16);
#else
#define LOGPROBS_CPU_AVX512 0
#endif

// A tile's entries [at, at + kTile) of a row of `kDtype` entries, widened exactly to f32, in
// kTileVectors vectors. bf16 on AVX-512: a vpermw with a zeroing mask puts 16 of a register's 32
// bf16 in the high halves of 16 pairs of words, which is their f32 (bf16 is f32's upper 16 bits):
// one operation per vector where the zero-extension and the shift took two.
template <LogitsDtype kDtype>
HWY_INLINE void LoadTile(const std::byte* row, std::uint64_t at, V* x) {
#if LOGPROBS_CPU_AVX512
  if constexpr (kDtype == LogitsDtype::bf16) {
    const __m512i low = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0,
                                         3, 0, 2, 0, 1, 0, 0, 0);
    const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
    constexpr __mmask32 kOddWords = 0xAAAAAAAAu;
    const auto* bits = reinterpret_cast<const __m512i*>(reinterpret_cast<const std::uint16_t*>(row) + at);
    for (std::size_t half = 0; half < kTileVectors / 2; ++half) {
      const __m512i b = _mm512_loadu_si512(bits + half);
      x[2 * half] = V{_mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kOddWords, low, b))};
      x[2 * half + 1] = V{_mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kOddWords, high, b))};
    }
    return;
  }
#endif
  for (std::size_t i = 0; i < kTileVectors; ++i) x[i] = LoadWidened<kDtype>(row, at + i * kN);
}

// The largest and the smallest of a vector's lanes, none NaN. Not hn::MaxOfLanes and MinOfLanes:
// Highway 1.0.3's portable fallback (EMU128) starts their folds at the lowest and highest finite
// floats, so a segment of only -inf got m = -FLT_MAX there, and its row a finite normalizer where
// SPEC §3 says NaN (fuzz_differential found it). On AVX-512, a tree of shuffles and maxps: the
// scalar folds (a store and fifteen dependent steps each), with the lane tree's below, once per
// segment of 1024 entries, held 8% of a K = 0 pass's samples (perf); the shuffles gained 4%.
HWY_INLINE float LargestLane(V v) {
#if LOGPROBS_CPU_AVX512
  return _mm512_reduce_max_ps(v.raw);
#endif
  HWY_ALIGN float lanes[kN];
  hn::Store(v, D(), lanes);
  float largest = lanes[0];
  for (std::size_t l = 1; l < kN; ++l) largest = lanes[l] > largest ? lanes[l] : largest;
  return largest;
}

HWY_INLINE float SmallestLane(V v) {
#if LOGPROBS_CPU_AVX512
  return _mm512_reduce_min_ps(v.raw);
#endif
  HWY_ALIGN float lanes[kN];
  hn::Store(v, D(), lanes);
  float smallest = lanes[0];
  for (std::size_t l = 1; l < kN; ++l) smallest = lanes[l] < smallest ? lanes[l] : smallest;
  return smallest;
}

// Whether x[0, n) holds a NaN (the cold path of segments whose max is not finite).
HWY_INLINE bool HoldsNaN(const float* x, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i)
    if (std::isnan(x[i])) return true;
  return false;
}

// The largest entry of x[0, n) that is not NaN (-inf where there is none): a segment's max where it
// holds a NaN, which its lanewise maxima can miss (a signaling NaN on AVX-512: TileMayAdmit).
HWY_INLINE float LargestNumber(const float* x, std::uint64_t n) {
  float largest = -std::numeric_limits<float>::infinity();
  for (std::uint64_t i = 0; i < n; ++i) largest = x[i] > largest ? x[i] : largest;
  return largest;
}

// canonical::lane_tree of the 16 logical lanes' sums, held in kRegs vectors. On AVX-512 the
// tree's levels are a shuffle and an add each: lane 2i + (2i + 1), then at distances 2, 4 and 8,
// lane 0 ending with the definition's sum (an addition's bits do not depend on its operands'
// order).
HWY_INLINE float LaneTree(const V* lanes) {
#if LOGPROBS_CPU_AVX512
  __m512 v = lanes[0].raw;
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));        // lanes 2i and 2i + 1
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));        // then 4i and 4i + 2
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));  // 8i and 8i + 4
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));  // 0 and 8
  return _mm512_cvtss_f32(v);
#endif
  HWY_ALIGN float lane_sums[canonical::kLanes];
  for (std::size_t h = 0; h < kRegs; ++h) hn::Store(lanes[h], D(), lane_sums + h * kN);
  return canonical::lane_tree(lane_sums);
}

// Markstein's corrected reciprocal: with z = RN(1 / T), q0 = RN(x z), r = RN(q0 T - x) and
// q1 = RN(q0 - r z) is RN(x / T), the IEEE quotient, for every |x| and T in [2^-60, 2^60]: checked
// on all 2^46 pairs of significands (x and T in [1, 2)), and scaling x or T by a power of two
// scales each step exactly while every step's result stays normal, which it does in that range
// (r is zero or at least 2^-107). Outside it (zeros, subnormals, infinities, NaN) the divider
// divides. optimized/cpu/README.md ("Temperatures") has the check and the speed.
#if LOGPROBS_CPU_AVX512
HWY_INLINE V CorrectedQuotient(V x, V t, V z) {
  const V q0 = hn::Mul(x, z);
  return hn::NegMulAdd(hn::MulSub(q0, t, x), z, q0);
}

// The max (min) of a and b where a quiet NaN lane takes the other's value: vrangeps with imm8 5
// (4), the larger (smaller) with its sign from the comparison, one instruction. Not hn::Max:
// x86's maxps returns its second operand whenever either is NaN, so in a tree a NaN could hide a
// value that beats the threshold. A signaling NaN lane gives a quiet NaN whatever the other's
// value, which a second vrangeps then drops with the value it hid: TileMayAdmit says what holds.
HWY_INLINE V MaxIgnoringNaN(V a, V b) { return V{_mm512_range_ps(a.raw, b.raw, 5)}; }
HWY_INLINE V MinIgnoringNaN(V a, V b) { return V{_mm512_range_ps(a.raw, b.raw, 4)}; }

// Whether some lane of a or of b is not <= threshold, NaN lanes included: a compare, and one
// masked by it (where an and of two compares' masks was a third operation).
HWY_INLINE bool EitherAbove(V a, V b, V threshold) {
  const __mmask16 at_most =
      _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(a.raw, threshold.raw, _CMP_LE_OQ), b.raw, threshold.raw, _CMP_LE_OQ);
  return at_most != 0xFFFF;
}

// Whether every lane of a and b is in CorrectedQuotient's range: the smaller and the larger
// magnitude of each pair of lanes (vrangeps 10 and 11, signs cleared), compared. A NaN lane may
// pass beside a number (vrangeps takes the number), and its quotient is then NaN either way.
HWY_INLINE bool InCorrectedRange(V a, V b) {
  const D d;
  const auto low = hn::Ge(V{_mm512_range_ps(a.raw, b.raw, 10)}, hn::Set(d, 0x1p-60f));
  const auto high = hn::Le(V{_mm512_range_ps(a.raw, b.raw, 11)}, hn::Set(d, 0x1p60f));
  return hn::AllTrue(d, hn::And(low, high));
}
#endif

// x / T for a tile, each lane the IEEE quotient. On AVX-512, in the form quotient_form() gives:
// all four vectors by the divider, or vectors 0 and 2 by the divider and 1 and 3 by the corrected
// reciprocal, whose three fused operations run beside it, where T and their magnitudes allow it.
// Which is faster is the core's: on the Xeon model 207 the divider takes 8 TSC ticks a vector
// where the pass without it takes 4.9, and the split took 0.87-0.92x the time of the divider
// alone; on Zen 5, whose divider is about three times as fast, the split's range test and
// reciprocal compete with the exp for the FMA pipes, and the divider alone takes 0.91-0.94x the
// split's time (optimized/cpu/README.md, "Temperatures" and "after fe9d8a9").
class TileDivisor {
 public:
  TileDivisor(float t, QuotientForm form)
      : t_(hn::Set(D(), t)),
        z_(hn::Set(D(), 1.0f / t)),
        split_(form == QuotientForm::divider_and_reciprocal && t >= 0x1p-60f && t <= 0x1p60f) {}

  HWY_INLINE void divide(V* x) const {
#if LOGPROBS_CPU_AVX512
    if (split_ && HWY_LIKELY(InCorrectedRange(x[1], x[3]))) {
      x[0] = hn::Div(x[0], t_);
      x[1] = CorrectedQuotient(x[1], t_, z_);
      x[2] = hn::Div(x[2], t_);
      x[3] = CorrectedQuotient(x[3], t_, z_);
      return;
    }
#endif
    for (std::size_t i = 0; i < kTileVectors; ++i) x[i] = hn::Div(x[i], t_);
  }

 private:
  V t_;
  [[maybe_unused]] V z_;         // RN(1 / T), the corrected reciprocal's (AVX-512 only)
  [[maybe_unused]] bool split_;  // the split form, and T in the reciprocal's range
};

#if LOGPROBS_CPU_AVX512
// The tile into the lanes' maxima and minima, from its pairs' maxima top01 (of x[0] and x[1]) and
// top23: trees of vrangeps (3 each) and their merges. A lane of the max or of the min is NaN only
// where both pairs' are; hn::Max and Min then keep max[0]'s and min[0]'s.
HWY_INLINE void TakeTile(const V* x, V top01, V top23, V* max, V* min) {
  const V bottom = MinIgnoringNaN(MinIgnoringNaN(x[0], x[1]), MinIgnoringNaN(x[2], x[3]));
  max[0] = hn::Max(MaxIgnoringNaN(top01, top23), max[0]);
  min[0] = hn::Min(bottom, min[0]);
}
#endif

// The tile taken into the lanes' maxima and minima: TileMayAdmit's extremes without its test, for
// a scan that admits nothing (its threshold is +inf). On AVX-512 that is two operations fewer a
// tile, the compares, which Zen 5 runs beside neither its fmas nor its adds: loops of independent
// operations ran fma and compare at 2.4 a cycle, add and compare at 2.3, fma and add at 4
// (optimized/cpu/README.md).
HWY_INLINE void TileExtremes(const V* x, V* max, V* min) {
#if LOGPROBS_CPU_AVX512
  {
    TakeTile(x, MaxIgnoringNaN(x[0], x[1]), MaxIgnoringNaN(x[2], x[3]), max, min);
    return;
  }
#endif
  for (std::size_t i = 0; i < kTileVectors; ++i) {
    max[i % kRegs] = hn::Max(x[i], max[i % kRegs]);
    min[i % kRegs] = hn::Min(x[i], min[i % kRegs]);
  }
}

// Pass 1's threshold test of one tile, which also takes the tile into the lanes' maxima and minima:
// true when some entry may be above `threshold` (the caller then admits, comparing each vector).
// Where MaxIgnoringNaN is one instruction, the tile's lanewise max and min are trees, and the test
// two compares of the pairs' maxima, the second masked by the first: a tile of only entries <=
// threshold (the common case once the threshold has risen) costs 10 operations (two trees of 3,
// two merges, the compares) where a max, a min and a compare per vector and the masks' ands cost
// 15, and the chains carried from tile to tile are one operation long, not four (maxps' latency
// is 4 cycles). The pairs', not the tile's max: vrangeps returns a quiet NaN where either operand
// is a signaling NaN, and the next vrangeps drops that NaN and the number it hid (the campaign
// found a row whose top entry was lost so); a pair's NaN fails the compare, and the tile is then
// admitted lane by lane. Against one compare of the tile's max, calls in turn in one process on
// Zen 5: 64 x 128256 f32 1.00-1.01x the time at K = 0 and 20, bf16 1.02x. A NaN also makes the
// segment's sum NaN (finish()), and its max is then taken again (LargestNumber). Elsewhere a
// compare per vector, and hn::Max(x, max) and Min, which keep max's and min's lane where x is NaN
// on x86 (elsewhere a NaN extreme only sends the segment down finish()'s slower paths).
HWY_INLINE bool TileMayAdmit(const V* x, V threshold, V* max, V* min) {
  const D d;
#if LOGPROBS_CPU_AVX512
  {
    // The pairs' maxima once, for the trees and the test.
    const V top01 = MaxIgnoringNaN(x[0], x[1]), top23 = MaxIgnoringNaN(x[2], x[3]);
    TakeTile(x, top01, top23, max, min);
    return EitherAbove(top01, top23, threshold);
  }
#endif
  auto below = hn::Le(x[0], threshold);
  for (std::size_t i = 1; i < kTileVectors; ++i) below = hn::And(below, hn::Le(x[i], threshold));
  TileExtremes(x, max, min);
  return !hn::AllTrue(d, below);
}

// Whether some entry of the tile is above `threshold` (TileMayAdmit's test alone).
HWY_INLINE bool TileAbove(const V* x, V threshold) {
  const D d;
#if LOGPROBS_CPU_AVX512
  return EitherAbove(MaxIgnoringNaN(x[0], x[1]), MaxIgnoringNaN(x[2], x[3]), threshold);
#endif
  auto above = hn::Gt(x[0], threshold);
  for (std::size_t i = 1; i < kTileVectors; ++i) above = hn::Or(above, hn::Gt(x[i], threshold));
  return !hn::AllFalse(d, above);
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::cpu
HWY_AFTER_NAMESPACE();

#endif  // LOGPROBS_CPU_TILE_STEPS_INL_H_
