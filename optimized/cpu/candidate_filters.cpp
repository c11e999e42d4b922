// The filters of candidate_filters.hpp, compiled once per Highway target by foreach_target.h.
// In place (all but the bracket, the split and the slots): the vector at i is loaded before
// anything is stored at kept <= i, and a store at kept writes at most up to i + N, the vector just
// loaded, so no entry is overwritten unread.
// clang-format off: foreach_target.h must come first, right after HWY_TARGET_INCLUDE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "candidate_filters.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format on

#include <algorithm>
#include <cstring>
#include <limits>

#include "candidate_filters.hpp"
#include "compress_admit-inl.h"
#include "hwy/highway.h"
#include "logprobs/canonical_arithmetic.hpp"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Moves the entries with values[i] >= bound (kStrict: > bound) to the front, in order.
template <bool kStrict>
std::size_t KeepPassing(float* values, std::uint32_t* tokens, std::size_t n, float bound) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const std::size_t lanes = hn::Lanes(d);
  const auto bound_v = hn::Set(d, bound);
  std::size_t kept = 0, i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, values + i);
    const auto pass = kStrict ? hn::Gt(v, bound_v) : hn::Ge(v, bound_v);
    kept += CompressPair(d, v, hn::LoadU(du, tokens + i), pass, values + kept, tokens + kept);
  }
  for (; i < n; ++i) {
    values[kept] = values[i];
    tokens[kept] = tokens[i];
    kept += kStrict ? values[i] > bound : values[i] >= bound;
  }
  return kept;
}

std::size_t KeepAtLeast(float* values, std::uint32_t* tokens, std::size_t n, float least) {
  return KeepPassing<false>(values, tokens, n, least);
}

std::size_t KeepAbove(float* values, std::uint32_t* tokens, std::size_t n, float bound) {
  return KeepPassing<true>(values, tokens, n, bound);
}

std::size_t LastTiesStart(const float* values, std::size_t n, float v, std::size_t count) {
  const hn::ScalableTag<float> d;
  const std::size_t lanes = hn::Lanes(d);
  const auto tie = hn::Set(d, v);
  // A vector at a time from the end while the count-th tie from the end lies further back (the
  // branch is taken until the last vector: predictable), then that vector's lanes one by one.
  std::size_t i = n, seen = 0;
  while (i >= lanes) {
    const std::size_t here = hn::CountTrue(d, hn::Eq(hn::LoadU(d, values + i - lanes), tie));
    if (seen + here >= count) break;
    seen += here;
    i -= lanes;
  }
  while (true) {
    --i;
    if (values[i] == v && ++seen == count) return i;
  }
}

std::size_t KeepBetween(const float* values, std::size_t n, float least, float most, float* out,
                        std::size_t* above) {
  const hn::ScalableTag<float> d;
  const std::size_t lanes = hn::Lanes(d);
  const auto least_v = hn::Set(d, least), most_v = hn::Set(d, most);
  std::size_t kept = 0, over = 0, i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, values + i);
    over += hn::CountTrue(d, hn::Gt(v, most_v));
    kept += CompressLanes(d, v, hn::And(hn::Ge(v, least_v), hn::Le(v, most_v)), out + kept);
  }
  for (; i < n; ++i) {
    out[kept] = values[i];
    over += values[i] > most;
    kept += values[i] >= least && values[i] <= most;
  }
  *above = over;
  return kept;
}

SplitCounts SplitAtPivot(const float* HWY_RESTRICT values, std::size_t n, float pivot, float* HWY_RESTRICT above,
                         float* HWY_RESTRICT below) {
  const hn::ScalableTag<float> d;
  const std::size_t lanes = hn::Lanes(d);
  const auto pivot_v = hn::Set(d, pivot);
  SplitCounts counts{0, 0};
  const auto split = [&](const hn::Vec<decltype(d)> v) {
    counts.above += CompressLanes(d, v, hn::Gt(v, pivot_v), above + counts.above);
    counts.below += CompressLanes(d, v, hn::Lt(v, pivot_v), below + counts.below);
  };
  // Two vectors an iteration, the same work in order: on Zen 5, cut_of_row at K = 65535 (a row of
  // 128256 in L2; its quickselects split) took 0.80x the time it took with one vector an iteration.
  std::size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    split(hn::LoadU(d, values + i));
    split(hn::LoadU(d, values + i + lanes));
  }
  if (i + lanes <= n) {
    split(hn::LoadU(d, values + i));
    i += lanes;
  }
  for (; i < n; ++i) {
    above[counts.above] = values[i];
    below[counts.below] = values[i];
    counts.above += values[i] > pivot;
    counts.below += values[i] < pivot;
  }
  return counts;
}

// values[i] = canonical::output_value(values[i], normalizer) for i < n, in place, at a finite
// normalizer: float(double(x) + normalizer), exact widening, one double addition, one rounding to
// f32 (x86's vcvtpd2ps rounds to nearest and overflows to inf, as the scalar conversion does).
// Half a vector at a time, the halves loaded and stored as such: no lane crosses a half. Highway
// 1.0.3's portable DemoteTo saturates at FLT_MAX where a slot needs -inf (x and n near -FLT_MAX):
// the definition lane by lane there.
void ToOutputValues(float* HWY_RESTRICT values, std::size_t n, double normalizer) {
  std::size_t i = 0;
#if HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  const hn::Half<hn::ScalableTag<float>> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const std::size_t lanes = hn::Lanes(dh);
  const auto n_v = hn::Set(dd, normalizer);
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::DemoteTo(dh, hn::Add(hn::PromoteTo(dd, hn::LoadU(dh, values + i)), n_v)), dh, values + i);
#endif
  for (; i < n; ++i) values[i] = canonical::output_value(values[i], normalizer);
}

// The lanes of `tied` that are among the first *ties of them in lane order; *ties loses them.
// All of them until the last vector with a tie to keep, which a scalar loop over its mask cuts.
template <class D, class M = hn::Mask<D>>
HWY_INLINE M FirstTies(D d, M tied, std::size_t* ties) {
  const std::size_t count = hn::CountTrue(d, tied);
  if (count <= *ties) {
    *ties -= count;
    return tied;
  }
  std::uint8_t bytes[8] = {};
  hn::StoreMaskBits(d, tied, bytes);
  std::uint64_t bits, kept = 0;
  std::memcpy(&bits, bytes, sizeof bits);
  for (; *ties > 0; --*ties) {
    const std::uint64_t lowest = bits & (~bits + 1);
    kept |= lowest;
    bits ^= lowest;
  }
  std::memcpy(bytes, &kept, sizeof kept);
  return hn::LoadMaskBits(d, bytes);
}

// The slots' entries first, as they are (two compresses per vector), then only their values
// converted, in place: converting every entry before the compress (two promotes, adds and demotes
// and the halves' shuffles per vector, beside the compresses on the same shuffle port) cost the
// same at any K. A row of 128256 in cache, best of 500 (Xeon model 207): K = 16383 38.8 -> 24.9
// us; K = 65535 38.0 -> 40.3, where the output's 512 KiB of stores bound either.
std::size_t WriteTopSlots(const float* HWY_RESTRICT x, std::size_t n, float kth, std::size_t ties, double normalizer,
                          float* HWY_RESTRICT values, std::uint32_t* HWY_RESTRICT tokens, std::size_t slots) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const std::size_t lanes = hn::Lanes(d);
  const auto kth_v = hn::Set(d, kth);
  std::size_t written = 0, i = 0;
  // An ascending row's top K is its second half: the vectors before the first that holds an entry
  // at or above kth write nothing, and need no compress (a random row's first vector nearly
  // always holds one: at K = V / 4 all 16 entries miss with odds of 1 in 100).
  while (i + lanes <= n && hn::AllFalse(d, hn::Ge(hn::LoadU(d, x + i), kth_v))) i += lanes;
  // The slots' lines asked for ahead, for writing: a batch's output (64 rows of 65536 slots, 32
  // MiB) is beyond the caches, and each line's first store otherwise waited on reading it in (64
  // rows' slots at K = 65535 from a row of 128256, best of 30 calls: 71-82 us a row unasked; 52-56
  // at 2 KiB ahead, 56-57 at 512 bytes, 57-67 at 4 KiB). Only within the slots: past them lie the
  // next row's, which another thread may be writing.
  constexpr std::size_t kAhead = 512;
  // Two vectors an iteration while both fit the slots, one line of each array asked for (about
  // what a pair writes): on Zen 5, against one vector an iteration (calls in turn in one process,
  // the median of 10 rounds' ratios), the kernel at K = 65535 took 0.93-0.95x the time (64 x
  // 128256 f32, 1 and 2 threads; bf16 0.93x) and 0.90-0.92x (1 x 128256), at K = 16383 1.00x.
  for (; i + 2 * lanes <= n && written + 2 * lanes <= slots; i += 2 * lanes) {
    const auto v = hn::LoadU(d, x + i), w = hn::LoadU(d, x + i + lanes);
    auto pass_v = hn::Gt(v, kth_v), pass_w = hn::Gt(w, kth_v);
    const auto tied_v = hn::Eq(v, kth_v), tied_w = hn::Eq(w, kth_v);
    // With no ties left to take (all taken, or a row of fewer than K candidates cut at -inf, whose
    // every -inf is a tie) the test is skipped.
    if (ties > 0 && HWY_UNLIKELY(!hn::AllFalse(d, hn::Or(tied_v, tied_w)))) {  // v's ties come first
      pass_v = hn::Or(pass_v, FirstTies(d, tied_v, &ties));
      pass_w = hn::Or(pass_w, FirstTies(d, tied_w, &ties));
    }
    const auto token = hn::Add(hn::Set(du, static_cast<std::uint32_t>(i)), hn::Iota(du, 0));
    if (written + kAhead < slots) {
      __builtin_prefetch(values + written + kAhead, 1);
      __builtin_prefetch(tokens + written + kAhead, 1);
    }
    written += CompressPair(d, v, token, pass_v, values + written, tokens + written);
    written += CompressPair(d, w, hn::Add(token, hn::Set(du, static_cast<std::uint32_t>(lanes))), pass_w,
                            values + written, tokens + written);
  }
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    auto pass = hn::Gt(v, kth_v);
    const auto tied = hn::Eq(v, kth_v);
    if (ties > 0 && HWY_UNLIKELY(!hn::AllFalse(d, tied))) pass = hn::Or(pass, FirstTies(d, tied, &ties));
    const auto token = hn::Add(hn::Set(du, static_cast<std::uint32_t>(i)), hn::Iota(du, 0));
    if (written + lanes <= slots) {
      if (written + kAhead < slots) {
        __builtin_prefetch(values + written + kAhead, 1);
        __builtin_prefetch(tokens + written + kAhead, 1);
      }
      written += CompressPair(d, v, token, pass, values + written, tokens + written);
      continue;
    }
    // The last slots: the vector compressed into scratch and as much of it copied as they hold,
    // since a whole-vector store would write past them (into the next row's slots).
    HWY_ALIGN float last_values[hn::MaxLanes(d)];
    HWY_ALIGN std::uint32_t last_tokens[hn::MaxLanes(d)];
    const std::size_t take = std::min(CompressPair(d, v, token, pass, last_values, last_tokens), slots - written);
    std::memcpy(values + written, last_values, take * sizeof(float));
    std::memcpy(tokens + written, last_tokens, take * sizeof(std::uint32_t));
    written += take;
    if (written == slots) break;  // a descending row's top K is its first half: the rest is below
  }
  for (; i < n && written < slots; ++i) {
    const bool tie = x[i] == kth && ties > 0;
    if (!(x[i] > kth || tie)) continue;
    ties -= tie;
    values[written] = x[i];
    tokens[written++] = static_cast<std::uint32_t>(i);
  }
  ToOutputValues(values, written, normalizer);
  return written;
}

std::size_t SampleLines(const float* x, std::size_t stride, std::size_t run, std::size_t lines, float* out,
                        float* line_max) {
  const hn::CappedTag<float, 16> d;  // run is a multiple of 16
  const std::size_t lanes = hn::Lanes(d);
  const auto none = hn::Set(d, -std::numeric_limits<float>::infinity());
  std::size_t kept = 0;
  for (std::size_t line = 0; line < lines; ++line) {
    if (line + 8 < lines) __builtin_prefetch(x + (line + 8) * stride);
    const float* begin = x + line * stride;
    auto max = none;
    for (std::size_t e = 0; e < run; e += lanes) {
      const auto v = hn::LoadU(d, begin + e);
      const auto candidate = hn::Gt(v, none);  // false for NaN
      max = hn::Max(max, hn::IfThenElse(candidate, v, none));
      kept += CompressLanes(d, v, candidate, out + kept);
    }
    line_max[line] = hn::GetLane(hn::MaxOfLanes(d, max));
  }
  return kept;
}

void ToOrderKeys(const float* values, std::size_t n, std::uint32_t* keys) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::RebindToSigned<decltype(d)> di;
  const std::size_t lanes = hn::Lanes(d);
  const auto sign = hn::Set(du, 0x80000000u);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, values + i);
    const auto bits = hn::IfThenZeroElse(hn::RebindMask(du, hn::Eq(v, hn::Zero(d))), hn::BitCast(du, v));
    // x ^ (all ones) flips a negative's bits; x ^ sign sets a positive's sign bit.
    const auto negative = hn::BitCast(du, hn::ShiftRight<31>(hn::BitCast(di, bits)));
    hn::StoreU(hn::Xor(bits, hn::Or(negative, sign)), du, keys + i);
  }
  for (; i < n; ++i) keys[i] = order_key(values[i]);
}

std::size_t KeepDigit(std::uint32_t* keys, std::size_t n, int shift, std::uint32_t mask, std::uint32_t digit) {
  const hn::ScalableTag<std::uint32_t> du;
  const std::size_t lanes = hn::Lanes(du);
  const auto digit_mask = hn::Set(du, mask), wanted = hn::Set(du, digit);
  std::size_t kept = 0, i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto k = hn::LoadU(du, keys + i);
    kept += CompressLanes(du, k, hn::Eq(hn::And(hn::ShiftRightSame(k, shift), digit_mask), wanted), keys + kept);
  }
  for (; i < n; ++i) {
    keys[kept] = keys[i];
    kept += ((keys[i] >> shift) & mask) == digit;
  }
  return kept;
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace logprobs::cpu {

HWY_EXPORT(KeepAtLeast);
HWY_EXPORT(KeepAbove);
HWY_EXPORT(LastTiesStart);
HWY_EXPORT(KeepBetween);
HWY_EXPORT(SplitAtPivot);
HWY_EXPORT(WriteTopSlots);
HWY_EXPORT(SampleLines);
HWY_EXPORT(ToOrderKeys);
HWY_EXPORT(KeepDigit);

std::size_t keep_at_least(float* values, std::uint32_t* tokens, std::size_t n, float least) {
  return HWY_DYNAMIC_DISPATCH(KeepAtLeast)(values, tokens, n, least);
}

std::size_t keep_above(float* values, std::uint32_t* tokens, std::size_t n, float bound) {
  return HWY_DYNAMIC_DISPATCH(KeepAbove)(values, tokens, n, bound);
}

std::size_t last_ties_start(const float* values, std::size_t n, float v, std::size_t count) {
  return HWY_DYNAMIC_DISPATCH(LastTiesStart)(values, n, v, count);
}

std::size_t keep_between(const float* values, std::size_t n, float least, float most, float* out,
                         std::size_t* above) {
  return HWY_DYNAMIC_DISPATCH(KeepBetween)(values, n, least, most, out, above);
}

SplitCounts split_at_pivot(const float* values, std::size_t n, float pivot, float* above, float* below) {
  return HWY_DYNAMIC_DISPATCH(SplitAtPivot)(values, n, pivot, above, below);
}

std::size_t write_top_slots(const float* x, std::size_t n, float kth, std::size_t ties, double normalizer,
                            float* values, std::uint32_t* tokens, std::size_t slots) {
  return HWY_DYNAMIC_DISPATCH(WriteTopSlots)(x, n, kth, ties, normalizer, values, tokens, slots);
}

std::size_t sample_lines(const float* x, std::size_t stride, std::size_t run, std::size_t lines, float* out,
                         float* line_max) {
  return HWY_DYNAMIC_DISPATCH(SampleLines)(x, stride, run, lines, out, line_max);
}

void to_order_keys(const float* values, std::size_t n, std::uint32_t* keys) {
  HWY_DYNAMIC_DISPATCH(ToOrderKeys)(values, n, keys);
}

std::size_t keep_digit(std::uint32_t* keys, std::size_t n, int shift, std::uint32_t mask, std::uint32_t digit) {
  return HWY_DYNAMIC_DISPATCH(KeepDigit)(keys, n, shift, mask, digit);
}

}  // namespace logprobs::cpu
#endif
