// The SIMD pass over one chunk of a row (declared in row_kernel.hpp), compiled once per Highway
// target by foreach_target.h and picked at run time by HWY_DYNAMIC_DISPATCH.
// Over 400 lines: one class, ChunkScanner, whose passes and admission share its state.
//
// The statistics are SPEC §8's canonical arithmetic (logprobs/canonical_arithmetic.hpp), and the
// layout of this loop is what makes every target give its bits: a segment's entries are summed in
// 16 logical lanes (entry 64 t + 16 u + l belongs to lane l), and a vector of N lanes holds
// logical lanes [h N, h N + N) of one step, so a tile (64 entries, 4 steps) is 4 * 16 / N vectors
// loaded in order and each logical lane sees the definition's operations in the definition's
// order, whatever N is (16 on AVX-512, 8 on AVX2, 4 on SSE4, 1 on the scalar fallback).
//
// Two passes over each segment of 1024 entries (4 KiB, so the second reads L1):
//   1. The max and min (every lane's, then across lanes: the segment's m, exact in any order),
//      top-K admission, the rank count. Admission: the tile is compared against the buffer's
//      threshold (TileMayAdmit: on AVX-512 its lanewise max, elsewhere each vector); only when
//      some lane may be above it does it take the admission path, which appends the lanes above
//      threshold (compress_admit-inl.h). x transformed from 16-bit or by a temperature is
//      written to a staging buffer here, so that it is computed once. (At small K the scan admits
//      nothing, and admit_only() admits afterwards from the segments that can hold the top-K:
//      admission by segment maxima, cpu_backend.cpp.)
//   2. Per lane: exp(x - m) by the definition's exp (canonical_exp-inl.h), summed per tile as
//      (E0 + E1) + (E2 + E3), tile after tile; then the 16 lanes in the definition's tree. A NaN
//      is found here, at no cost per entry: it makes the segment's sum NaN (segment()).
// The passes are pipelined: pass 2 over segment g runs tile by tile beside pass 1 over segment
// g + 1 (sum_beside), each segment's staged x in one of two stages, so that pass 1's loads and
// reductions overlap the exp's arithmetic instead of waiting between the passes.
// Why m is the segment's max and not a running reference point: every exponent is then <= 0 (no
// overflow, no rescaling inside a segment), and segments combine by the definition's pairwise
// tree, which the CUDA backend computes with thousands of threads and this loop in order.
// SPEC §3: NaN is flagged (kHasNaN), +inf makes m = +inf (kHasPosInf); the normalizer of either
// is NaN whatever the sums, so a NaN that reaches a lane's max or a sum changes no output bit.
// clang-format off: foreach_target.h must come first, right after HWY_TARGET_INCLUDE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "row_kernel.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format on

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "canonical_exp-inl.h"
#include "compress_admit-inl.h"
#include "hwy/highway.h"
#include "row_kernel.hpp"
#include "tile_steps-inl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

static_assert(kTile <= CandidateBuffer::kSlack - 16, "a tile's admissions fit the buffer's slack");

// The rare part of admission, out of line: compaction and the ascending-row seed. Returns the
// new threshold.
HWY_NOINLINE float CompactOrSeed(CandidateBuffer& buffer, const RowSource& row, std::uint64_t ahead,
                                 std::uint64_t ahead_n) {
  if (buffer.over_capacity()) buffer.compact_at(ahead);
  if (buffer.wants_seed()) buffer.seed_from_ahead(row, ahead, ahead_n);
  return buffer.threshold();
}

// kDtype and kDivide (a temperature) are template parameters so that the loops hold no branch on
// them; kStaged: x differs from the row's bytes, so pass 1 writes it for pass 2 to read. kAdmits
// false: the threshold is +inf (K = 0, admission by segment maxima, the large-K cut), which only
// rises, so the scan admits nothing and pass 1 takes no threshold test (ScanOrAdmit says why).
// Everything run() calls per segment is inline (LOGPROBS_CPU_STEP, but on the targets without an
// fma instruction): out of line, each segment's Segment (its extremes, two vectors) crossed calls
// through the stack, written as scalars and read back as vectors, and each call reloaded the exp's
// constants (1 and 64 x 128256 f32 and bf16, K = 0 and 20, 1 thread, two alternating runs on Zen 5:
// 4-7% faster inlined).
template <LogitsDtype kDtype, bool kDivide, bool kAdmits>
class ChunkScanner {
  static constexpr bool kStaged = kDtype != LogitsDtype::f32 || kDivide;
  // Pass 2 asks for the segment this many ahead, a segment's cache lines spread over its 16 tiles.
  // One ahead arrived late (pass 1 still waited on memory); three ahead against two, each call in
  // turn in one process on Zen 5, 1 thread: 64 x 128256 f32 0.88-0.96x the time at K = 0 to 63
  // (2 threads 0.92x), 256 rows 0.96x; K >= 255, bf16 and rows in cache (1 and 8 rows) 0.99-1.01x.
  static constexpr std::uint64_t kPrefetchSegments = 3;
  static constexpr std::size_t kPrefetchLines =
      canonical::kSegment * dtype_bytes(kDtype) / 64 / canonical::kTilesPerSegment;

 public:
  ChunkScanner(const ChunkInput& in, CandidateBuffer& buffer)
      : in_(in),
        row_(*in.row),
        divisor_(row_.temperature.value_or(1.0f), kDivide ? quotient_form() : QuotientForm::divider),
        buffer_(buffer),
        threshold_(hn::Set(D(), buffer.threshold())),
        xs_(hn::Set(D(), in.xs)),
        count_rank_(in.count_rank) {}

  ChunkScan run() {
    buffer_.start_chunk();
    canonical::Partial parts[canonical::kGroupSegments];
    const std::uint64_t count = canonical::segment_count(in_.n);
    Segment current = segment_at(0);
    first_pass_from(current, 0);
    for (std::uint64_t g = 0; g < count; ++g) {
      Segment next = segment_at(g + 1);
      parts[g] = finish(current, next);
      current = next;
    }
    ChunkScan scan;
    for (std::uint64_t g = 0; g < count; ++g) scan.segment_max[g] = parts[g].max;
    scan.partial = CanonicalTree(parts, count);
    scan.flags = (has_nan_ ? canonical::kHasNaN : 0u) | (pos_inf_ ? canonical::kHasPosInf : 0u);
    scan.at_least_xs = at_least_xs_;
    return scan;
  }

  // Admission alone, from the input's segments, tile by tile as pass 1 admits. A seed
  // (candidate_buffer.hpp) may read the segments skipped between: their entries are all below
  // the threshold, so its K-th largest is still among entries that will be admitted.
  void admit_only() {
    buffer_.start_chunk();
    V x[kTileVectors];
    const std::span<const std::uint32_t> segments = in_.admit_segments;
    const std::uint64_t last = std::min(in_.vocab, (segments.back() + std::uint64_t{1}) * canonical::kSegment);
    for (const std::uint32_t segment : segments) {
      const std::uint64_t begin = segment * canonical::kSegment;
      const std::uint64_t end = std::min(in_.vocab, begin + canonical::kSegment);
      for (std::uint64_t at = begin; at < end; at += kTile) {
        if (at + kTile <= end) {
          LoadTile<kDtype>(row_.row, at, x);
          if constexpr (kDivide) divisor_.divide(x);
        } else {
          stage_partial_tile(at, end - at, stage_[0], x);
        }
        if (TileAbove(x, threshold_)) admit(x, at, last);
      }
    }
  }

 private:
  // One segment of the chunk, while pass 1 runs over it: where it is, where its staged x go, each
  // lane's max and min so far, and which tiles pass 2 is to admit (bit t for tile t, bit
  // full_tiles for the partial tile).
  struct Segment {
    std::uint64_t begin = 0, full_tiles = 0, tail = 0;
    float* stage = nullptr;
    std::uint32_t to_admit = 0;
    V max[kRegs], min[kRegs];
  };

  // Segment g of the chunk (empty past its end). Segments take turns with the two stages: pass 1
  // of one writes its stage while pass 2 of the one before reads the other.
  HWY_INLINE Segment segment_at(std::uint64_t g) {
    const D d;
    Segment segment;
    const std::uint64_t offset = g * canonical::kSegment;
    const std::uint64_t n = offset < in_.n ? std::min(canonical::kSegment, in_.n - offset) : 0;
    segment.begin = in_.begin + offset;
    segment.full_tiles = n / kTile;
    segment.tail = n % kTile;
    segment.stage = stage_[g % 2];
    for (V& m : segment.max) m = hn::Set(d, kNegInf);
    for (V& m : segment.min) m = hn::Set(d, std::numeric_limits<float>::infinity());
    return segment;
  }

  // Pass 1 over full tile t of `segment`: x loaded (widened, divided, staged), then the threshold
  // test, the max and min, the rank count. Returns whether the tile may admit.
  LOGPROBS_CPU_STEP bool first_pass_full_tile(const Segment& segment, std::uint64_t t, V* max, V* min) {
    const D d;
    V x[kTileVectors];
    const std::uint64_t at = segment.begin + t * kTile;
    LoadTile<kDtype>(row_.row, at, x);
    if constexpr (kDivide) divisor_.divide(x);
    for (std::size_t i = 0; kStaged && i < kTileVectors; ++i) hn::Store(x[i], d, segment.stage + t * kTile + i * kN);
    return first_pass_tile(x, kTile, max, min);
  }

  // Pass 1 over the segment's full tiles from `t` on, then its partial tile (staged whatever the
  // dtype: -inf past the row's end adds exp(-inf) = 0 and never enters).
  LOGPROBS_CPU_STEP void first_pass_from(Segment& segment, std::uint64_t t) {
    for (; t < segment.full_tiles; ++t)
      segment.to_admit |= std::uint32_t{first_pass_full_tile(segment, t, segment.max, segment.min)} << t;
    if (segment.tail == 0) return;
    const std::uint64_t at = segment.begin + segment.full_tiles * kTile;
    V x[kTileVectors];
    stage_partial_tile(at, segment.tail, segment.stage + segment.full_tiles * kTile, x);
    segment.to_admit |= std::uint32_t{first_pass_tile(x, segment.tail, segment.max, segment.min)} << segment.full_tiles;
  }

  // A partial tile: its first `valid` x from `at`, then -inf, written to `stage` and loaded.
  HWY_INLINE void stage_partial_tile(std::uint64_t at, std::uint64_t valid, float* stage, V* x) const {
    for (std::uint64_t e = 0; e < kTile; ++e) stage[e] = e < valid ? row_.at(at + e) : kNegInf;
    for (std::size_t i = 0; i < kTileVectors; ++i) x[i] = hn::Load(D(), stage + i * kN);
  }

  // Pass 1 over one tile whose x are in x[]: the threshold test (where the scan admits), the max
  // and min, the rank count. Returns whether the tile may admit: pass 2 admits it (admit_tile).
  LOGPROBS_CPU_STEP bool first_pass_tile(const V* x, std::uint64_t valid, V* max, V* min) {
    bool may_admit = false;
    if constexpr (kAdmits) {
      may_admit = TileMayAdmit(x, threshold_, max, min);
    } else {
      TileExtremes(x, max, min);
    }
    if (count_rank_) count_at_least_xs(x, valid);
    return may_admit;
  }

  // Pass 2's admission of tile t of `done` (x: its x), if pass 1 found it may admit. Why in pass
  // 2: pass 1's x come from memory, and a branch on them mispredicts only once they arrive; the
  // flush then drops the loads issued after it, so that memory is waited on again and again. Pass
  // 2 branches on a bit set a segment earlier, over x that L1 holds. Each call in turn in one
  // process on Zen 5, 1 thread, against admission in pass 1: 64 x 128256 f32 0.74x the time at K
  // = 255, 0.70x at 1023, 0.96x at 4095 (2 threads 0.80x / 0.75x / 0.92x), bf16 0.70x at 255,
  // T = 0.7 0.84x; a row in cache 0.96-1.01x. The threshold only rises, so pass 1's test against
  // an earlier one lets through every tile that admits now, and admit() tests each lane again.
  LOGPROBS_CPU_STEP void admit_tile(const Segment& done, const float* HWY_RESTRICT x, std::uint64_t t) {
    if (!kAdmits || HWY_LIKELY(((done.to_admit >> t) & 1) == 0)) return;
    V tile[kTileVectors];
    for (std::size_t i = 0; i < kTileVectors; ++i) tile[i] = hn::LoadU(D(), x + t * kTile + i * kN);
    admit(tile, done.begin + t * kTile, in_.begin + in_.n);
  }

  // Pass 2 over one tile of x at p: each lane's term (E0 + E1) + (E2 + E3), added to its sum.
  // Meanwhile `prefetch` (a later segment's share for this tile) is asked for, so that memory
  // streams while the exp computes.
  template <ExpDomain kDomain>
  static LOGPROBS_CPU_STEP void second_pass_tile(const float* HWY_RESTRICT p, V m, V* lanes, std::uintptr_t prefetch,
                                                 const Exp2Table<D>& table) {
    const D d;
    for (std::size_t line = 0; line < kPrefetchLines; ++line)
      __builtin_prefetch(reinterpret_cast<const void*>(prefetch + 64 * line));
    for (std::size_t h = 0; h < kRegs; ++h) {
      const V e0 = CanonicalExp<kDomain>(d, hn::Sub(hn::LoadU(d, p + (0 * kRegs + h) * kN), m), table);
      const V e1 = CanonicalExp<kDomain>(d, hn::Sub(hn::LoadU(d, p + (1 * kRegs + h) * kN), m), table);
      const V e2 = CanonicalExp<kDomain>(d, hn::Sub(hn::LoadU(d, p + (2 * kRegs + h) * kN), m), table);
      const V e3 = CanonicalExp<kDomain>(d, hn::Sub(hn::LoadU(d, p + (3 * kRegs + h) * kN), m), table);
      lanes[h] = hn::Add(lanes[h], hn::Add(hn::Add(e0, e1), hn::Add(e2, e3)));
    }
  }

  // Pass 2 over `done` (x: its x, m: its max), tile by tile beside pass 1 over `next`, then
  // whatever tiles of either are left: the 16 lane sums, in the definition's tree. Why beside:
  // pass 2 waits on the max of pass 1 over the same segment, and a segment's pass 2 (some 900
  // instructions) fills the out-of-order window, so with the passes in turn each segment's loads
  // and reductions could not overlap the exp's arithmetic. Zen 5, 1 thread, against the passes in
  // turn: 64 x 128256 at K <= 20 1.01-1.07x for f32, 1.07-1.12x for bf16 (two alternating runs).
  // Each segment's arithmetic is unchanged: only the instructions' order is.
  template <ExpDomain kDomain>
  LOGPROBS_CPU_STEP float sum_beside(const Segment& done, const float* HWY_RESTRICT x, V m, std::uintptr_t prefetch,
                                     Segment& next) {
    const D d;
    V lanes[kRegs];
    for (V& l : lanes) l = hn::Zero(d);
    const Exp2Table<D> table;
    const std::uint64_t both = std::min(done.full_tiles, next.full_tiles);
    // next's extremes in locals: through the struct, each tile's max and min went to memory and
    // came back, a store-to-load round trip on the loop's critical path (1 x and 64 x 128256 at
    // K = 0 to 255, 1 thread, three alternating runs: 2-8% slower).
    V max[kRegs], min[kRegs];
    for (std::size_t h = 0; h < kRegs; ++h) max[h] = next.max[h], min[h] = next.min[h];
    std::uint32_t to_admit = 0;
    for (std::uint64_t t = 0; t < both; ++t) {
      to_admit |= std::uint32_t{first_pass_full_tile(next, t, max, min)} << t;
      second_pass_tile<kDomain>(x + t * kTile, m, lanes, prefetch + t * kPrefetchLines * 64, table);
      admit_tile(done, x, t);
    }
    next.to_admit = to_admit;
    for (std::size_t h = 0; h < kRegs; ++h) next.max[h] = max[h], next.min[h] = min[h];
    first_pass_from(next, both);
    for (std::uint64_t t = both; t < done.full_tiles; ++t) {
      second_pass_tile<kDomain>(x + t * kTile, m, lanes, prefetch + t * kPrefetchLines * 64, table);
      admit_tile(done, x, t);
    }
    if (done.tail > 0) {
      second_pass_tile<kDomain>(done.stage + done.full_tiles * kTile, m, lanes, prefetch, table);
      admit_tile(done, done.stage, done.full_tiles);
    }
    return LaneTree(lanes);
  }

  // The canonical partial of `done`, whose pass 1 has run, while pass 1 runs over `next`.
  LOGPROBS_CPU_STEP canonical::Partial finish(Segment& done, Segment& next) {
    const D d;
    for (std::size_t h = 1; h < kRegs; ++h) {
      done.max[0] = hn::Max(done.max[0], done.max[h]);
      done.min[0] = hn::Min(done.min[0], done.min[h]);
    }
    const float largest = LargestLane(done.max[0]);
    const V m = hn::Set(d, largest);
    canonical::Partial partial{largest, 0.0f};
    pos_inf_ |= partial.max == std::numeric_limits<float>::infinity();

    const float* x = kStaged ? done.stage : row_.plain_row() + done.begin;
    // The bytes kPrefetchSegments ahead, past the row's end too: there, in a batch whose rows
    // follow one another, lies the start of the row that is likely read next (asking for it
    // rather than for this segment again: 0.98x the time at 64 x 128256 f32, K = 0 and 20). A
    // prefetch never faults, whatever the address; the address is an integer until then, since
    // pointer arithmetic past the row's end is undefined.
    const std::uintptr_t prefetch = reinterpret_cast<std::uintptr_t>(row_.entry(done.begin)) +
                                    kPrefetchSegments * canonical::kSegment * dtype_bytes(kDtype);
    // And the same segment's first line in the row below, a row ahead: the line that the next
    // row's speculation samples first thing (candidate_buffer.hpp), in a page whose translation
    // is then at hand when the scan streams it. Each call in turn in one process on Zen 5, 64 x
    // 128256 f32, 1 thread: 0.95-0.98x the time at K = 0, 0.97-0.98x at K = 255 and 4095; the line
    // 16 or 48 segments ahead in the same row instead, 0.96x at K = 0 but 0.99x at K = 255.
    if (row_.row_below != 0)
      __builtin_prefetch(reinterpret_cast<const void*>(row_.row_below + done.begin * dtype_bytes(kDtype)));
    // NaN: pass 1 does not see it (neither the maxima nor the minima take a NaN lane), but with
    // m finite the sum does: its terms are exp's for x - m in [kExpFloor, 0], or 0 below, or NaN
    // for NaN (kNaNStays), so the sum is NaN iff the segment holds a NaN. Its bits are then not the
    // definition's, but SPEC §3 makes the row's normalizer NaN whatever the sums.
    if (SmallestLane(done.min[0]) - largest >= canonical::kExpFloor) {
      // Every x - m in exp's range (x - m is monotone in x, so the min's tells): exp's selection
      // of 0 below the range would select nothing, and is left out (NaN stays NaN there too).
      partial.sum = sum_beside<ExpDomain::kInRange>(done, x, m, prefetch, next);
    } else if (std::isfinite(largest)) {
      partial.sum = sum_beside<ExpDomain::kNaNStays>(done, x, m, prefetch, next);
    } else {
      // m = +inf or -inf (only -inf and NaN): every term is exp of NaN or of -inf, 0 by the
      // definition, so the sum is 0; NaN is looked for.
      first_pass_from(next, 0);
      for (std::uint64_t t = 0; t < done.full_tiles; ++t) admit_tile(done, x, t);
      if (done.tail > 0) admit_tile(done, done.stage, done.full_tiles);
      if (HoldsNaN(x, done.full_tiles * kTile) || HoldsNaN(done.stage + done.full_tiles * kTile, done.tail))
        holds_nan(done, x, partial);
      return partial;
    }
    if (std::isnan(partial.sum)) holds_nan(done, x, partial);
    return partial;
  }

  // A segment that holds a NaN makes the row's normalizer NaN (SPEC §3), but its max still ranks
  // it for admission by segment maxima (cpu_backend.cpp), where a max too small would skip the
  // segment that holds the top entries: the max of its numbers, looked for entry by entry (a cold
  // path: NaN rows only), where pass 1's lanewise maxima can miss one (LargestNumber says why).
  void holds_nan(const Segment& done, const float* x, canonical::Partial& partial) {
    has_nan_ = true;
    partial.max = std::max(LargestNumber(x, done.full_tiles * kTile),
                           LargestNumber(done.stage + done.full_tiles * kTile, done.tail));
  }

  // SPEC §2.9's count over the tile's first `valid` entries (the padding of a partial tile is -inf,
  // which an x_s of -inf would count). CountTrue, a mask's population count, runs on the scalar
  // ports beside the vector work that bounds the pass; counting in vector lanes (a select and an
  // add per vector) cost about 12% of a K = 0 pass, this about 4% (logprobs-bench --ranks).
  LOGPROBS_CPU_STEP void count_at_least_xs(const V* x, std::uint64_t valid) {
    const D d;
    for (std::size_t i = 0; i < kTileVectors; ++i) {
      const std::uint64_t before = i * kN;
      auto counted = hn::Ge(x[i], xs_);
      if (valid < before + kN) counted = hn::And(counted, hn::FirstN(d, valid > before ? valid - before : 0));
      at_least_xs_ += hn::CountTrue(d, counted);
    }
  }

  // Top-K admission of one tile whose first entry is `at`: appends the lanes above threshold, with
  // their tokens, in token order and without a branch per vector (at large K, which vectors admit
  // is unpredictable); a seed, where the buffer asks for one, reads the row up to `end`.
  LOGPROBS_CPU_STEP void admit(const V* x, std::uint64_t at, std::uint64_t end) {
    const D d;
    // The tail and the count in locals: through the buffer's members, each vector's stores
    // waited on the previous one's update of the count in memory (64 x 128256 f32, K = 4095:
    // 6.9 -> 7.3 GB/s).
    float* const values = buffer_.value_tail();
    std::uint32_t* const tokens = buffer_.token_tail();
    const V threshold = threshold_;
    std::size_t admitted = 0;
    for (std::size_t i = 0; i < kTileVectors; ++i) {
      // Gt is false for NaN, and for -inf (threshold >= -inf).
      const auto token = static_cast<std::uint32_t>(at + i * kN);
      admitted += CompressAdmit(d, x[i], hn::Gt(x[i], threshold), token, values + admitted, tokens + admitted);
    }
    buffer_.added(admitted);
    if (HWY_UNLIKELY(buffer_.over_capacity() || buffer_.wants_seed())) {
      const std::uint64_t ahead = at + kTile;
      threshold_ = hn::Set(d, CompactOrSeed(buffer_, row_, ahead, ahead < end ? end - ahead : 0));
    }
  }

  const ChunkInput& in_;
  const RowSource& row_;
  const TileDivisor divisor_;  // x / T
  CandidateBuffer& buffer_;
  V threshold_;
  const V xs_;
  const bool count_rank_;
  std::uint64_t at_least_xs_ = 0;
  bool has_nan_ = false;
  bool pos_inf_ = false;
  HWY_ALIGN float stage_[2][canonical::kSegment];
};

// A scan from a threshold of +inf admits nothing (x > +inf is false for every x, and the threshold
// only rises), so it leaves out pass 1's threshold test: calls in turn in one process on Zen 5, at
// K = 0 and 20 (admission by segment maxima), AVX-512: 64 x 128256 f32 0.96x the time, bf16 0.95x,
// T = 0.7 0.95-0.96x, 1 x 128256 0.96x (2 threads 0.97-0.98x); AVX2: 1 x 128256 f32 0.91x. A
// scanner more per dtype and divisor adds to this file's build (the sanitizers' build of it took
// 78 s, 124 s with them all), so only where the targets are: f32 and bf16, on the targets
// with an fma instruction (the others are slow anyway); f16 rows keep the test (105 s).
template <LogitsDtype kDtype, bool kDivide>
ChunkScan ScanOrAdmit(const ChunkInput& in, CandidateBuffer& buffer) {
  if (!in.admit_segments.empty()) {
    ChunkScanner<kDtype, kDivide, true>(in, buffer).admit_only();
    return {};
  }
  if constexpr (kNativeFma && kDtype != LogitsDtype::f16) {
    if (buffer.threshold() == std::numeric_limits<float>::infinity())
      return ChunkScanner<kDtype, kDivide, false>(in, buffer).run();
  }
  return ChunkScanner<kDtype, kDivide, true>(in, buffer).run();
}

template <LogitsDtype kDtype>
ChunkScan ScanChunkOf(const ChunkInput& in, CandidateBuffer& buffer) {
  if (in.row->temperature) return ScanOrAdmit<kDtype, true>(in, buffer);
  return ScanOrAdmit<kDtype, false>(in, buffer);
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

// The divider alone where it is measured faster (TileDivisor): AMD's family 1Ah, Zen 5. Elsewhere,
// the Xeon's split, the form measured first.
QuotientForm fastest_quotient_form() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return QuotientForm::divider_and_reciprocal;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return QuotientForm::divider_and_reciprocal;
  const unsigned family = ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF);  // base 0xF + extended, on AMD
  if (family >= 0x1A) return QuotientForm::divider;
#endif
  return QuotientForm::divider_and_reciprocal;
}

namespace {
std::atomic<QuotientForm>& form_in_use() {
  static std::atomic<QuotientForm> form{fastest_quotient_form()};
  return form;
}
}  // namespace

QuotientForm quotient_form() { return form_in_use().load(std::memory_order_relaxed); }
void set_quotient_form(QuotientForm form) { form_in_use().store(form, std::memory_order_relaxed); }

void exp_for_test(const float* in, float* out, std::size_t n) { HWY_DYNAMIC_DISPATCH(ExpForTest)(in, out, n); }

void combine_for_test(const canonical::Partial* a, const canonical::Partial* b, canonical::Partial* out,
                      std::size_t n) {
  HWY_DYNAMIC_DISPATCH(CombineForTest)(a, b, out, n);
}

}  // namespace logprobs::cpu
#endif
