// The SIMD pass over one chunk of a row (declared in row_kernel.hpp), compiled once per Highway
// target by foreach_target.h and picked at run time by HWY_DYNAMIC_DISPATCH.
//
// The statistics are SPEC §8's canonical arithmetic (logprobs/canonical_arithmetic.hpp), and the
// layout of this loop is what makes every target give its bits: a segment's entries are summed in
// 16 logical lanes (entry 64 t + 16 u + l belongs to lane l), and a vector of N lanes holds
// logical lanes [h N, h N + N) of one step, so a tile (64 entries, 4 steps) is 4 * 16 / N vectors
// loaded in order and each logical lane sees the definition's operations in the definition's
// order, whatever N is (16 on AVX-512, 8 on AVX2, 4 on SSE4, 1 on the scalar fallback).
//
// Two passes over each segment of 1024 entries (4 KiB, so the second reads L1):
//   1. The max (every lane's, then across lanes: the segment's m, exact in any order), top-K
//      admission, the rank count. Admission: the tile is compared against the buffer's threshold
//      (one Le + And per vector); only when some lane is not <= threshold does it take the
//      admission path, which appends the lanes above threshold (compress_admit-inl.h). A NaN
//      fails every `<=`, so NaN detection costs nothing on the common path: the admission path
//      records it. x transformed from 16-bit or by a temperature is written to a staging buffer
//      here, so that it is computed once.
//   2. Per lane: exp(x - m) by the definition's exp (canonical_exp-inl.h), summed per tile as
//      (E0 + E1) + (E2 + E3), tile after tile; then the 16 lanes in the definition's tree.
// Why m is the segment's max and not a running reference point: every exponent is then <= 0 (no
// overflow, no rescaling inside a segment), and segments combine by the definition's pairwise
// tree, which the CUDA backend computes with thousands of threads and this loop in order.
// SPEC §3: NaN is flagged (kHasNaN), +inf makes m = +inf (kHasPosInf); the normalizer of either
// is NaN whatever the sums, so a NaN that reaches a lane's max on a target whose Max passes it
// through changes no output bit.
// clang-format off: foreach_target.h must come first, right after HWY_TARGET_INCLUDE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "row_kernel.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "canonical_exp-inl.h"
#include "compress_admit-inl.h"
#include "hwy/highway.h"
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
static_assert(kTile <= CandidateBuffer::kSlack - 16, "a tile's admissions fit the buffer's slack");

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

// The largest and the smallest of a vector's lanes. Not hn::MaxOfLanes and MinOfLanes: Highway
// 1.0.3's portable fallback (EMU128) starts their folds at the lowest and highest finite floats,
// so a segment of only -inf got m = -FLT_MAX there, and its row a finite normalizer where SPEC §3
// says NaN (fuzz_differential found it). Once per segment of 1024 entries: the cost is nothing.
HWY_INLINE float LargestLane(V v) {
  HWY_ALIGN float lanes[kN];
  hn::Store(v, D(), lanes);
  float largest = lanes[0];
  for (std::size_t l = 1; l < kN; ++l) largest = lanes[l] > largest ? lanes[l] : largest;
  return largest;
}

HWY_INLINE float SmallestLane(V v) {
  HWY_ALIGN float lanes[kN];
  hn::Store(v, D(), lanes);
  float smallest = lanes[0];
  for (std::size_t l = 1; l < kN; ++l) smallest = lanes[l] < smallest ? lanes[l] : smallest;
  return smallest;
}

// The rare part of admission, out of line: compaction and the ascending-row seed. Returns the
// new threshold.
HWY_NOINLINE float CompactOrSeed(CandidateBuffer& buffer, const RowSource& row, std::uint64_t ahead,
                                 std::uint64_t ahead_n) {
  if (buffer.over_capacity()) buffer.compact();
  if (buffer.wants_seed()) buffer.seed_from_ahead(row, ahead, ahead_n);
  return buffer.threshold();
}

// kDtype and kDivide (a temperature) are template parameters so that the loops hold no branch on
// them; kStaged: x differs from the row's bytes, so pass 1 writes it for pass 2 to read.
template <LogitsDtype kDtype, bool kDivide>
class ChunkScanner {
  static constexpr bool kStaged = kDtype != LogitsDtype::f32 || kDivide;
  // Pass 2 asks for the segment this many ahead (one ahead arrived late: pass 1 still waited on
  // memory), a segment's cache lines spread over its 16 tiles.
  static constexpr std::uint64_t kPrefetchSegments = 2;
  static constexpr std::size_t kPrefetchLines =
      canonical::kSegment * dtype_bytes(kDtype) / 64 / canonical::kTilesPerSegment;

 public:
  ChunkScanner(const ChunkInput& in, CandidateBuffer& buffer)
      : in_(in),
        row_(*in.row),
        temperature_(hn::Set(D(), row_.temperature.value_or(1.0f))),
        buffer_(buffer),
        threshold_(hn::Set(D(), buffer.threshold())),
        xs_(hn::Set(D(), in.xs)) {
  }

  ChunkScan run() {
    buffer_.start_chunk();
    canonical::Partial parts[canonical::kGroupSegments];
    std::uint64_t count = 0;
    for (std::uint64_t offset = 0; offset < in_.n; offset += canonical::kSegment)
      parts[count++] = segment(in_.begin + offset, std::min(canonical::kSegment, in_.n - offset));
    ChunkScan scan;
    scan.partial = CanonicalTree(parts, count);
    scan.flags = (has_nan_ ? canonical::kHasNaN : 0u) | (pos_inf_ ? canonical::kHasPosInf : 0u);
    scan.at_least_xs = at_least_xs_;
    return scan;
  }

 private:
  // Pass 1 over one tile at `at` whose x are in x[]: admission, the max and min, the rank count.
  HWY_INLINE void first_pass_tile(const V* x, std::uint64_t at, std::uint64_t valid, V* max, V* min) {
    admit(x, at);
    for (std::size_t i = 0; i < kTileVectors; ++i) {
      max[i % kRegs] = hn::Max(x[i], max[i % kRegs]);
      min[i % kRegs] = hn::Min(x[i], min[i % kRegs]);
    }
    if (in_.count_rank) count_at_least_xs(x, valid);
  }

  // Pass 2 over one tile of x at p: each lane's term (E0 + E1) + (E2 + E3), added to its sum.
  // Meanwhile `prefetch` (the next segment's share for this tile, or null) is asked for: pass 1
  // is memory's and pass 2 the exp's, and without it the two would take turns instead of
  // overlapping (perf: half the samples waited on pass 1's loads).
  template <bool kInRange>
  static HWY_INLINE void second_pass_tile(const float* HWY_RESTRICT p, V m, V* lanes, const std::byte* prefetch,
                                          const Exp2Table<D>& table) {
    const D d;
    if (prefetch != nullptr)
      for (std::size_t line = 0; line < kPrefetchLines; ++line) __builtin_prefetch(prefetch + 64 * line);
    for (std::size_t h = 0; h < kRegs; ++h) {
      const V e0 = CanonicalExp<kInRange>(d, hn::Sub(hn::LoadU(d, p + (0 * kRegs + h) * kN), m), table);
      const V e1 = CanonicalExp<kInRange>(d, hn::Sub(hn::LoadU(d, p + (1 * kRegs + h) * kN), m), table);
      const V e2 = CanonicalExp<kInRange>(d, hn::Sub(hn::LoadU(d, p + (2 * kRegs + h) * kN), m), table);
      const V e3 = CanonicalExp<kInRange>(d, hn::Sub(hn::LoadU(d, p + (3 * kRegs + h) * kN), m), table);
      lanes[h] = hn::Add(lanes[h], hn::Add(hn::Add(e0, e1), hn::Add(e2, e3)));
    }
  }

  // Segment [begin, begin + n): its canonical partial.
  canonical::Partial segment(std::uint64_t begin, std::uint64_t n) {
    const D d;
    const std::uint64_t full_tiles = n / kTile, tail = n % kTile;
    V max[kRegs], min[kRegs];
    for (V& m : max) m = hn::Set(d, kNegInf);
    for (V& m : min) m = hn::Set(d, std::numeric_limits<float>::infinity());
    for (std::uint64_t t = 0; t < full_tiles; ++t) {
      V x[kTileVectors];
      const std::uint64_t at = begin + t * kTile;
      for (std::size_t i = 0; i < kTileVectors; ++i) {
        x[i] = LoadWidened<kDtype>(row_.row, at + i * kN);
        if constexpr (kDivide) x[i] = hn::Div(x[i], temperature_);
        if constexpr (kStaged) hn::Store(x[i], d, stage_ + t * kTile + i * kN);
      }
      first_pass_tile(x, at, kTile, max, min);
    }
    if (tail > 0) {  // the last, partial tile: -inf past the row's end adds exp(-inf) = 0 and never enters
      float* stage = stage_ + full_tiles * kTile;
      const std::uint64_t at = begin + full_tiles * kTile;
      for (std::uint64_t e = 0; e < kTile; ++e) stage[e] = e < tail ? row_.at(at + e) : kNegInf;
      V x[kTileVectors];
      for (std::size_t i = 0; i < kTileVectors; ++i) x[i] = hn::Load(d, stage + i * kN);
      first_pass_tile(x, at, tail, max, min);
    }
    for (std::size_t h = 1; h < kRegs; ++h) {
      max[0] = hn::Max(max[0], max[h]);
      min[0] = hn::Min(min[0], min[h]);
    }
    const float largest = LargestLane(max[0]);
    const V m = hn::Set(d, largest);
    canonical::Partial partial{largest, 0.0f};
    pos_inf_ |= partial.max == std::numeric_limits<float>::infinity();

    V lanes[kRegs];
    for (V& l : lanes) l = hn::Zero(d);
    const Exp2Table<D> table;
    const float* x = kStaged ? stage_ : row_.plain_row() + begin;
    const bool ahead = begin + kPrefetchSegments * canonical::kSegment < in_.vocab;
    const std::byte* next = row_.entry(begin + kPrefetchSegments * canonical::kSegment);
    // Every x - m of the segment in exp's range (x - m is monotone in x, so the min's tells):
    // exp's selection of 0 below the range would select nothing, and is left out. The min does
    // not see NaN on x86 (the row's normalizer is NaN anyway, SPEC §3).
    const bool in_range = SmallestLane(min[0]) - largest >= canonical::kExpFloor;
    for (std::uint64_t t = 0; t < full_tiles; ++t) {
      const std::byte* prefetch = ahead ? next + t * kPrefetchLines * 64 : nullptr;
      if (in_range) {
        second_pass_tile<true>(x + t * kTile, m, lanes, prefetch, table);
      } else {
        second_pass_tile<false>(x + t * kTile, m, lanes, prefetch, table);
      }
    }
    if (tail > 0) second_pass_tile<false>(stage_ + full_tiles * kTile, m, lanes, nullptr, table);
    HWY_ALIGN float lane_sums[canonical::kLanes];
    for (std::size_t h = 0; h < kRegs; ++h) hn::Store(lanes[h], d, lane_sums + h * kN);
    partial.sum = canonical::lane_tree(lane_sums);
    return partial;
  }

  // SPEC §2.9's count over the tile's first `valid` entries (the padding of a partial tile is -inf,
  // which an x_s of -inf would count). CountTrue, a mask's population count, runs on the scalar
  // ports beside the vector work that bounds the pass; counting in vector lanes (a select and an
  // add per vector) cost about 12% of a K = 0 pass, this about 4% (logprobs-bench --ranks).
  HWY_INLINE void count_at_least_xs(const V* x, std::uint64_t valid) {
    const D d;
    for (std::size_t i = 0; i < kTileVectors; ++i) {
      const std::uint64_t before = i * kN;
      auto counted = hn::Ge(x[i], xs_);
      if (valid < before + kN) counted = hn::And(counted, hn::FirstN(d, valid > before ? valid - before : 0));
      at_least_xs_ += hn::CountTrue(d, counted);
    }
  }

  // Top-K admission of one tile whose first entry is `at`: appends the lanes above threshold,
  // with their tokens, in token order and without a branch per vector (at large K, which vectors
  // admit is unpredictable).
  HWY_INLINE void admit(const V* x, std::uint64_t at) {
    const D d;
    auto below = hn::Le(x[0], threshold_);
    for (std::size_t i = 1; i < kTileVectors; ++i) below = hn::And(below, hn::Le(x[i], threshold_));
    if (HWY_LIKELY(hn::AllTrue(d, below))) return;
    for (std::size_t i = 0; i < kTileVectors; ++i) {
      // Gt is false for NaN, and for -inf (threshold >= -inf).
      const auto token = static_cast<std::uint32_t>(at + i * kN);
      buffer_.added(
          CompressAdmit(d, x[i], hn::Gt(x[i], threshold_), token, buffer_.value_tail(), buffer_.token_tail()));
      // IsNaN, not Ne(x, x): Highway's Ne is an ordered compare on x86 (false for NaN).
      if (HWY_UNLIKELY(!hn::AllFalse(d, hn::IsNaN(x[i])))) has_nan_ = true;
    }
    if (HWY_UNLIKELY(buffer_.over_capacity() || buffer_.wants_seed())) {
      const std::uint64_t ahead = at + kTile, end = in_.begin + in_.n;
      threshold_ = hn::Set(d, CompactOrSeed(buffer_, row_, ahead, ahead < end ? end - ahead : 0));
    }
  }

  const ChunkInput& in_;
  const RowSource& row_;
  const V temperature_;
  CandidateBuffer& buffer_;
  V threshold_;
  const V xs_;
  std::uint64_t at_least_xs_ = 0;
  bool has_nan_ = false;
  bool pos_inf_ = false;
  HWY_ALIGN float stage_[canonical::kSegment];
};

template <LogitsDtype kDtype>
ChunkScan ScanChunkOf(const ChunkInput& in, CandidateBuffer& buffer) {
  if (in.row->temperature) return ChunkScanner<kDtype, true>(in, buffer).run();
  return ChunkScanner<kDtype, false>(in, buffer).run();
}

ChunkScan ScanChunk(const ChunkInput& in, CandidateBuffer& buffer) {
  switch (in.row->dtype) {
    case LogitsDtype::bf16:
      return ScanChunkOf<LogitsDtype::bf16>(in, buffer);
    case LogitsDtype::f16:
      return ScanChunkOf<LogitsDtype::f16>(in, buffer);
    case LogitsDtype::f32:
      break;
  }
  return ScanChunkOf<LogitsDtype::f32>(in, buffer);
}

const char* CurrentTargetName() { return hwy::TargetName(HWY_TARGET); }

void ExpForTest(const float* in, float* out, std::size_t n) {
  const D d;
  HWY_ALIGN float buf[kN];
  for (std::size_t i = 0; i < n; i += kN) {
    const std::size_t m = std::min(kN, n - i);
    for (std::size_t l = 0; l < kN; ++l) buf[l] = l < m ? in[i + l] : 0.0f;
    hn::Store(CanonicalExp(d, hn::Load(d, buf)), d, buf);
    std::memcpy(out + i, buf, m * sizeof(float));
  }
}

void CombineForTest(const canonical::Partial* a, const canonical::Partial* b, canonical::Partial* out, std::size_t n) {
  const D d;
  HWY_ALIGN float am[kN], as[kN], bm[kN], bs[kN];
  for (std::size_t i = 0; i < n; i += kN) {
    const std::size_t m = std::min(kN, n - i);
    for (std::size_t l = 0; l < kN; ++l) {
      const bool in = l < m;
      am[l] = in ? a[i + l].max : 0.0f, as[l] = in ? a[i + l].sum : 0.0f;
      bm[l] = in ? b[i + l].max : 0.0f, bs[l] = in ? b[i + l].sum : 0.0f;
    }
    V max = hn::Load(d, am), sum = hn::Load(d, as);
    CanonicalCombine(d, max, sum, hn::Load(d, bm), hn::Load(d, bs));
    hn::Store(max, d, am);
    hn::Store(sum, d, as);
    for (std::size_t l = 0; l < m; ++l) out[i + l] = {am[l], as[l]};
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace logprobs::cpu {

HWY_EXPORT(ScanChunk);
HWY_EXPORT(CurrentTargetName);
HWY_EXPORT(ExpForTest);
HWY_EXPORT(CombineForTest);

ChunkScan scan_chunk(const ChunkInput& in, CandidateBuffer& buffer) {
  return HWY_DYNAMIC_DISPATCH(ScanChunk)(in, buffer);
}

// HWY_CHOOSE_<TARGET> (highway.h, what HWY_EXPORT builds its table from) names the function
// compiled for that target, or nullptr when the build has none.
std::span<const TargetKernel> compiled_kernels() {
  static const std::vector<TargetKernel> kernels = [] {
    constexpr std::int64_t kFallback = (HWY_TARGETS & HWY_EMU128) ? HWY_EMU128 : HWY_SCALAR;
    const TargetKernel all[] = {{HWY_AVX3_DL, HWY_CHOOSE_AVX3_DL(ScanChunk)},
                                {HWY_AVX3, HWY_CHOOSE_AVX3(ScanChunk)},
                                {HWY_AVX2, HWY_CHOOSE_AVX2(ScanChunk)},
                                {HWY_SSE4, HWY_CHOOSE_SSE4(ScanChunk)},
                                {HWY_SSSE3, HWY_CHOOSE_SSSE3(ScanChunk)},
                                {kFallback, HWY_CHOOSE_FALLBACK(ScanChunk)}};
    std::vector<TargetKernel> compiled;
    for (const TargetKernel& k : all)
      if (k.scan != nullptr) compiled.push_back(k);
    return compiled;
  }();
  return kernels;
}

const char* scan_chunk_target() { return HWY_DYNAMIC_DISPATCH(CurrentTargetName)(); }

void exp_for_test(const float* in, float* out, std::size_t n) { HWY_DYNAMIC_DISPATCH(ExpForTest)(in, out, n); }

void combine_for_test(const canonical::Partial* a, const canonical::Partial* b, canonical::Partial* out,
                      std::size_t n) {
  HWY_DYNAMIC_DISPATCH(CombineForTest)(a, b, out, n);
}

}  // namespace logprobs::cpu
#endif
