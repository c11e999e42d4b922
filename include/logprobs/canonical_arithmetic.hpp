// SPEC §8: the canonical arithmetic, defined once. A backend that claims it gives, on every
// input, the bits these functions give; the CPU backend on each SIMD target and the CUDA backend
// compile this header (it is __host__ __device__-clean: no Highway, no libm beyond fma), and the
// registered backend `canonical` (reference/canonical.cpp) is its plain scalar implementation.
//
// What is computed, for a row x[0..V) (SPEC §2.5's x: widened, divided by the temperature):
//   - The row is cut into segments of kSegment = 1024 entries (the last one shorter).
//   - Segment g: its max m_g over the entries that are not NaN (-inf if there are none), and
//     s_g = sum of exp(x_j - m_g), summed in this order: logical lane l (0..15) takes the entries
//     j = 1024 g + 64 t + 16 u + l of tiles t = 0..15 and steps u = 0..3; per tile its term is
//     (E0 + E1) + (E2 + E3), added to the lane's sum tile after tile (from +0); entries past the
//     row's end count as -inf. The 16 lane sums then add in a pairwise tree (lanes 2i and 2i+1,
//     then those pairs two by two, ..., four levels).
//   - The segments' (m_g, s_g) combine in a pairwise tree (pairwise_tree): at each level adjacent
//     pairs (2i, 2i+1) combine by `combine` and an unpaired last one moves up as it is. Cut into
//     groups of 16 segments (16384 entries) from the row's start, the same tree is the pairwise
//     tree over the groups' own pairwise trees: below level 4 no pair crosses a group (16 / 2^L
//     is even), the last group's pairs start at an even index, and 4 levels bring any group to
//     one node. So a row's groups can be reduced apart (by several threads) and then together.
//   - n = -(M + log S) in double (log_f64), NaN when the row holds a NaN or a +inf or only -inf.
//   - Each output value is float(double(x) + n): a double addition rounded once to f32 (the one
//     quiet NaN when n is NaN).
//   - The top slots are the K largest candidates under (value descending, token ascending),
//     written in ascending token order; padding (V, float(-inf + n)) after them.
// exp_f32 and log_f64 are written in IEEE operations, the same ones everywhere: every
// multiply-add is a true fused fma (std::fma on the host, which is correctly rounded also where
// it is not a single instruction; __fmaf_rn on the device), every other operation a single
// rounded + - * /. Nothing here may be contracted or reassociated by a compiler: the CPU
// backend builds with -ffp-contract=off, the CUDA one with -fmad=false.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__CUDACC__)
#define LOGPROBS_CANONICAL_HD __host__ __device__ __forceinline__
#else
#define LOGPROBS_CANONICAL_HD inline
#endif

namespace logprobs::canonical {

inline constexpr std::uint64_t kSegment = 1024;                 // entries per segment
inline constexpr int kLanes = 16;                               // logical lanes of a segment's sum
inline constexpr int kSteps = 4;                                // a lane's entries per tile
inline constexpr std::uint64_t kTile = kLanes * kSteps;         // 64 entries
inline constexpr int kTilesPerSegment = int(kSegment / kTile);  // 16

// The segments of a row (or chunk) of n entries, the last one possibly shorter.
LOGPROBS_CANONICAL_HD constexpr std::uint64_t segment_count(std::uint64_t n) { return (n + kSegment - 1) / kSegment; }

// exp_f32 of anything below it is 0. Every sum the exp feeds holds a term exp(0) = 1 (a segment's
// max; combine's larger part), and e^-50 is 2^-72.1: the terms it drops from a row of V < 2^32
// entries weigh under 2^-40 of its sum, far below the f32 sums' own rounding (SPEC §5's floor is
// 2^-21). Why not lower: the one-step reduction below stays within 4 ulp only down to about -54.
inline constexpr float kExpFloor = -50.0f;

LOGPROBS_CANONICAL_HD float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

LOGPROBS_CANONICAL_HD std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

LOGPROBS_CANONICAL_HD float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// 2^(j / 32) for j = 0..31, each rounded to the nearest f32 (computed to 60 digits): exp_f32's
// table. Its bits, not its values, so that every compiler and device reads the same numbers.
// (Device code cannot read a namespace-scope host array; the CUDA backend's copy is
// kExp2TableDevice below, the same bits.)
// clang-format off
#define LOGPROBS_EXP2_TABLE                                                                                    \
  {0x3f800000u, 0x3f82cd87u, 0x3f85aac3u, 0x3f88980fu, 0x3f8b95c2u, 0x3f8ea43au, 0x3f91c3d3u, 0x3f94f4f0u, \
   0x3f9837f0u, 0x3f9b8d3au, 0x3f9ef532u, 0x3fa27043u, 0x3fa5fed7u, 0x3fa9a15bu, 0x3fad583fu, 0x3fb123f6u, \
   0x3fb504f3u, 0x3fb8fbafu, 0x3fbd08a4u, 0x3fc12c4du, 0x3fc5672au, 0x3fc9b9beu, 0x3fce248cu, 0x3fd2a81eu, \
   0x3fd744fdu, 0x3fdbfbb8u, 0x3fe0ccdfu, 0x3fe5b907u, 0x3feac0c7u, 0x3fefe4bau, 0x3ff5257du, 0x3ffa83b3u}
// clang-format on
inline constexpr int kExp2TableSize = 32;
inline constexpr std::uint32_t kExp2Table[kExp2TableSize] = LOGPROBS_EXP2_TABLE;
#if defined(__CUDACC__)
// Global memory (through L1), not __constant__: the 32 lanes of a warp read different entries,
// which the constant cache would serve one address at a time.
static __device__ const std::uint32_t kExp2TableDevice[kExp2TableSize] = LOGPROBS_EXP2_TABLE;
#endif

LOGPROBS_CANONICAL_HD std::uint32_t exp2_table_bits(int j) {
#if defined(__CUDA_ARCH__)
  return kExp2TableDevice[j];
#else
  return kExp2Table[j];
#endif
}

// exp(x) for x <= 0 (the argument x_j - m of a softmax term), at most 4 ulp from the true value
// on [kExpFloor, 0] (3.89 ulp, measured on every f32 there: tests/test_canonical_arithmetic.cpp);
// 0 below it, for -inf and for NaN. The steps (each SIMD target repeats them lane by lane):
//   t = fma(x, 32 / ln2, 1.5 * 2^23)   rounds 32 x / ln2 to an integer k held in t's low bits
//       (t lies in [2^23, 2^24), where the f32 spacing is 1);
//   r = fma(-k, c, x)   with c = ln2 / 32 rounded to f32, which is 2^-28.4 of itself away from it
//       (a Cody-Waite constant of one part): the fma rounds once a result below 2^-6, and r is off
//       by k (ln2 / 32 - c), under 2^-22.7 for |k| <= 2308: the error that grows with |x|
//       (in all, 1.94 ulp on [-5, 0], 2.24 on [-12, 0], 3.45 on [-40, 0], 3.89 on [-50, 0]);
//   e^r = 1 + r (c1 + c2 r), the minimax quadratic on |r| <= ln2 / 64 (relative error 0.89 *
//       2^-24; exp(0) stays exactly 1), evaluated as s = r * (c1 + c2 r);
//   2^(k / 32) = 2^(k >> 5) * table[k & 31], the power of two added to the entry's exponent bits
//       (k >> 5 >= -73 here, so it stays normal), and the result T + T s in one fma.
// Why a table, a quadratic and one reduction step: five fused operations where a degree-6
// polynomial over |r| <= ln2 / 2 took nine (and a second reduction step, which held the exp to 1.74
// ulp, one more), and the exp is what bounds the CPU backend's pass at small K
// (optimized/cpu/README.md). SPEC §5's floor, 8 * 2^-24 of a row's sum, covers terms within 4 ulp
// (4 * 2^-23 each at most, relative), and the terms that weigh most, near the max, are within 2.3.
LOGPROBS_CANONICAL_HD float exp_f32(float x) {
  if (!(x >= kExpFloor)) return 0.0f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  const float t = fma_f32(x, 46.1662413084468283f, kShifter);
  const float kf = t - kShifter;
  const float r = fma_f32(-kf, 0.021660849452018738f, x);
  const float s = r * fma_f32(0.4999999701976776f, r, 1.0000146627426147f);
  const int k = int(kf);
  const int j = k & (kExp2TableSize - 1);
  const std::uint32_t scale = std::uint32_t((k - j) / kExp2TableSize) << 23;  // 2^(k >> 5), wrapping
  const float table = float_of(exp2_table_bits(j) + scale);
  return fma_f32(table, s, table);
}

// log(s) for a finite s >= 1 (a row's sum, which holds its max's term 1), to about 1e-16
// relative: s = 2^e f with f in [sqrt(1/2), sqrt(2)), log f = 2 atanh(z), z = (f - 1) / (f + 1)
// (|z| <= 0.1716), by its odd series to z^21 (the next term is below 2^-60 of the sum).
LOGPROBS_CANONICAL_HD double log_f64(double s) {
  std::uint64_t b;
  std::memcpy(&b, &s, sizeof b);
  int e = int((b >> 52) & 0x7ff) - 1023;
  b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;  // f in [1, 2)
  double f;
  std::memcpy(&f, &b, sizeof f);
  if (f > 1.4142135623730951) {
    f = f * 0.5;
    e = e + 1;
  }
  const double z = (f - 1.0) / (f + 1.0);
  const double z2 = z * z;
  double series = 1.0 / 21.0;
  for (int k = 19; k >= 1; k -= 2) series = series * z2 + 1.0 / double(k);
  const double log_f = 2.0 * z * series;
  // ln 2 in two parts: e * kLn2Hi is exact for |e| < 2^11.
  constexpr double kLn2Hi = 0.6931471803691238164901733398437500;
  constexpr double kLn2Lo = 1.9082149292705877000220098e-10;
  return double(e) * kLn2Hi + (log_f + double(e) * kLn2Lo);
}

// A part of a row reduced to (max, sum of exp(x - max)); flags for the SPEC §3 specials, which
// make the normalizer NaN whatever the sums.
struct Partial {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
};

inline constexpr std::uint32_t kHasNaN = 1;
inline constexpr std::uint32_t kHasPosInf = 2;

// The pairwise tree's node: the partial of two adjacent parts, left and right.
LOGPROBS_CANONICAL_HD Partial combine(Partial a, Partial b) {
  if (a.max == b.max) return {a.max, a.sum + b.sum};  // also both -inf: never exp(-inf - -inf)
  if (a.max > b.max) return {a.max, fma_f32(b.sum, exp_f32(b.max - a.max), a.sum)};
  return {b.max, fma_f32(a.sum, exp_f32(a.max - b.max), b.sum)};
}

// The 16 lane sums of a segment, added in the pairwise tree (2i with 2i + 1, level by level).
LOGPROBS_CANONICAL_HD float lane_tree(const float* lanes) {
  float level[kLanes / 2];
  for (int i = 0; i < kLanes / 2; ++i) level[i] = lanes[2 * i] + lanes[2 * i + 1];
  for (int width = kLanes / 4; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) level[i] = level[2 * i] + level[2 * i + 1];
  return level[0];
}

// The pairwise tree over parts[0, count): level by level, parts 2i and 2i + 1 combine and an
// unpaired last one moves up as it is. Overwrites parts; count >= 1.
LOGPROBS_CANONICAL_HD Partial pairwise_tree(Partial* parts, std::uint64_t count) {
  while (count > 1) {
    for (std::uint64_t i = 0; i < count / 2; ++i) parts[i] = combine(parts[2 * i], parts[2 * i + 1]);
    if (count % 2 == 1) parts[count / 2] = parts[count - 1];
    count = (count + 1) / 2;
  }
  return parts[0];
}

// Segments per group: the rows' unit of parallel work (see the comment at the top).
inline constexpr std::uint64_t kGroupSegments = 16;

// n = -(M + log S), NaN for the rows SPEC §3 makes NaN.
LOGPROBS_CANONICAL_HD double normalizer(Partial row, std::uint32_t flags) {
  if (flags != 0 || !(row.max > -std::numeric_limits<float>::infinity()))
    return std::numeric_limits<double>::quiet_NaN();
  return -(double(row.max) + log_f64(double(row.sum)));
}

// An output value: x + n in double, rounded once to f32; the one quiet NaN when n is NaN (devices
// differ in the NaN an addition returns, and SPEC §8 is about every bit).
LOGPROBS_CANONICAL_HD float output_value(float x, double n) {
  if (n != n) return std::numeric_limits<float>::quiet_NaN();
  return float(double(x) + n);
}

// ---- The definition, entry by entry (what `canonical` runs and each SIMD target is tested against)

// The flags of one entry.
LOGPROBS_CANONICAL_HD std::uint32_t flags_of(float x) {
  if (x != x) return kHasNaN;
  if (x == std::numeric_limits<float>::infinity()) return kHasPosInf;
  return 0;
}

// Segment x[0, n), n <= kSegment, as the header's comment defines it.
LOGPROBS_CANONICAL_HD Partial segment_partial(const float* x, std::uint64_t n, std::uint32_t& flags) {
  Partial p;
  for (std::uint64_t j = 0; j < n; ++j) {
    flags |= flags_of(x[j]);
    if (x[j] > p.max) p.max = x[j];  // false for NaN
  }
  float lanes[kLanes] = {};
  for (std::uint64_t tile = 0; tile * kTile < n; ++tile) {
    for (int l = 0; l < kLanes; ++l) {
      float e[kSteps];
      for (int u = 0; u < kSteps; ++u) {
        const std::uint64_t j = tile * kTile + std::uint64_t(u) * kLanes + std::uint64_t(l);
        e[u] = j < n ? exp_f32(x[j] - p.max) : 0.0f;
      }
      lanes[l] = lanes[l] + ((e[0] + e[1]) + (e[2] + e[3]));
    }
  }
  p.sum = lane_tree(lanes);
  return p;
}

// The whole row's partial: the pairwise tree over its segments. `parts` holds at least
// segment_count(vocab) partials of scratch.
LOGPROBS_CANONICAL_HD Partial row_partial(const float* x, std::uint64_t vocab, std::uint32_t& flags, Partial* parts) {
  std::uint64_t count = 0;
  for (std::uint64_t begin = 0; begin < vocab; begin += kSegment) {
    const std::uint64_t n = vocab - begin < kSegment ? vocab - begin : kSegment;
    parts[count++] = segment_partial(x + begin, n, flags);
  }
  return pairwise_tree(parts, count);
}

}  // namespace logprobs::canonical
