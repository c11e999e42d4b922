// Appends the lanes of a vector that pass a mask, with their tokens, branch-free (included by
// row_kernel.cpp and candidate_filters.cpp inside their per-target namespaces; Highway's -inl.h
// convention).
//
// Why not hn::CompressStore everywhere: Highway 1.0.3 keeps its x86 permutation tables (1 KiB for
// AVX2, 256 B for SSE4) as non-static constexpr arrays inside the function, and GCC 12 copies
// them onto the stack on every call; at levels 12 about a third of all blocks admit something,
// so that copy would cost more than the admission itself. The table here is static: for each
// mask, the indices of the passing lanes in ascending order (then the others), one byte each,
// widened to 32-bit indices by one load-and-extend. With more than 8 lanes (AVX-512) the table
// would be too large, and the native compress instruction does it.

#if defined(LOGPROBS_CPU_COMPRESS_ADMIT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LOGPROBS_CPU_COMPRESS_ADMIT_INL_H_
#undef LOGPROBS_CPU_COMPRESS_ADMIT_INL_H_
#else
#define LOGPROBS_CPU_COMPRESS_ADMIT_INL_H_
#endif

#include <array>
#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <std::size_t kLanes>
constexpr std::array<std::uint8_t, (kLanes << kLanes)> MakeCompressIndices() {
  std::array<std::uint8_t, (kLanes << kLanes)> table{};
  for (std::size_t mask = 0; mask < (std::size_t{1} << kLanes); ++mask) {
    std::size_t out = mask * kLanes;
    for (std::size_t lane = 0; lane < kLanes; ++lane)
      if ((mask >> lane) & 1) table[out++] = static_cast<std::uint8_t>(lane);
    for (std::size_t lane = 0; lane < kLanes; ++lane)
      if (!((mask >> lane) & 1)) table[out++] = static_cast<std::uint8_t>(lane);
  }
  return table;
}

template <std::size_t kLanes>
struct CompressIndices {
  static constexpr auto kTable = MakeCompressIndices<kLanes>();
};

// For vectors of at most 8 lanes: the indices of the lanes where `pass` is true, in lane order,
// then the others; their count in *count.
template <class D, class M = hn::Mask<D>>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> PassingLanesFirst(D d, M pass, std::size_t* count) {
  constexpr std::size_t kLanes = hn::MaxLanes(D());
  static_assert(kLanes <= 8, "the table holds masks of at most 8 lanes");
  std::uint64_t bits = 0;
  hn::StoreMaskBits(d, pass, reinterpret_cast<std::uint8_t*>(&bits));
  *count = hwy::PopCount(bits);
  const hn::Rebind<std::uint8_t, D> d8;
  return hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(d8, &CompressIndices<kLanes>::kTable[bits * kLanes]));
}

// Writes the lanes of `values` where `pass` is true, and the same lanes of `tokens`, to the front
// of out_values and out_tokens, in lane order; returns how many. Writes a whole vector to each:
// the caller leaves one vector of room past the count, or filters in place (the outputs at or
// before the vector's own place, which it has already loaded).
template <class D, class V = hn::Vec<D>, class VU = hn::Vec<hn::RebindToUnsigned<D>>, class M = hn::Mask<D>>
HWY_INLINE std::size_t CompressPair(D d, V values, VU tokens, M pass, float* HWY_RESTRICT out_values,
                                    std::uint32_t* HWY_RESTRICT out_tokens) {
  const hn::RebindToUnsigned<D> du;
  if constexpr (hn::MaxLanes(D()) > 8) {
    // Compress in a register, then store the whole vector: hn::CompressStore emits the memory
    // form of vcompressps, which Zen 4 runs as a slow microcoded sequence.
    hn::StoreU(hn::Compress(tokens, hn::RebindMask(du, pass)), du, out_tokens);
    hn::StoreU(hn::Compress(values, pass), d, out_values);
    return hn::CountTrue(d, pass);
  } else {
    std::size_t count;
    const auto lanes = PassingLanesFirst(d, pass, &count);
    hn::StoreU(hn::TableLookupLanes(values, hn::IndicesFromVec(d, lanes)), d, out_values);
    hn::StoreU(hn::TableLookupLanes(tokens, hn::IndicesFromVec(du, lanes)), du, out_tokens);
    return count;
  }
}

// The same for one vector of 32-bit lanes alone (keys, or values without their tokens).
template <class D, class V = hn::Vec<D>, class M = hn::Mask<D>>
HWY_INLINE std::size_t CompressLanes(D d, V lanes, M pass, hn::TFromD<D>* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(D()) > 8) {
    hn::StoreU(hn::Compress(lanes, pass), d, out);
    return hn::CountTrue(d, pass);
  } else {
    std::size_t count;
    const auto passing = PassingLanesFirst(d, pass, &count);
    hn::StoreU(hn::TableLookupLanes(lanes, hn::IndicesFromVec(d, passing)), d, out);
    return count;
  }
}

// Admission: the lanes of `values` where `pass` is true, with their tokens first_token + lane.
template <class D, class V = hn::Vec<D>, class M = hn::Mask<D>>
HWY_INLINE std::size_t CompressAdmit(D d, V values, M pass, std::uint32_t first_token, float* HWY_RESTRICT out_values,
                                     std::uint32_t* HWY_RESTRICT out_tokens) {
  const hn::RebindToUnsigned<D> du;
  // Iota with a constant start folds to a constant; Highway 1.0.3 builds Iota(first_token) with
  // eight scalar stores and a vector load, which stalls on store forwarding.
  const auto tokens = hn::Add(hn::Set(du, first_token), hn::Iota(du, 0));
  return CompressPair(d, values, tokens, pass, out_values, out_tokens);
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::cpu
HWY_AFTER_NAMESPACE();

#endif  // LOGPROBS_CPU_COMPRESS_ADMIT_INL_H_
