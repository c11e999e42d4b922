// The filters of candidate_filters.hpp, compiled once per Highway target by foreach_target.h.
// In place (all but the bracket and the split): the vector at i is loaded before anything is
// stored at kept <= i, and a store at kept writes at most up to i + N, the vector just loaded, so
// no entry is overwritten unread.
// clang-format off: foreach_target.h must come first, right after HWY_TARGET_INCLUDE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "candidate_filters.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format on

#include "candidate_filters.hpp"
#include "compress_admit-inl.h"
#include "hwy/highway.h"

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
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, values + i);
    counts.above += CompressLanes(d, v, hn::Gt(v, pivot_v), above + counts.above);
    counts.below += CompressLanes(d, v, hn::Lt(v, pivot_v), below + counts.below);
  }
  for (; i < n; ++i) {
    above[counts.above] = values[i];
    below[counts.below] = values[i];
    counts.above += values[i] > pivot;
    counts.below += values[i] < pivot;
  }
  return counts;
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

void to_order_keys(const float* values, std::size_t n, std::uint32_t* keys) {
  HWY_DYNAMIC_DISPATCH(ToOrderKeys)(values, n, keys);
}

std::size_t keep_digit(std::uint32_t* keys, std::size_t n, int shift, std::uint32_t mask, std::uint32_t digit) {
  return HWY_DYNAMIC_DISPATCH(KeepDigit)(keys, n, shift, mask, digit);
}

}  // namespace logprobs::cpu
#endif
