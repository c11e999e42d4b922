// The SIMD pass over one chunk of a row (declared in row_kernel.hpp), compiled once per Highway
// target by foreach_target.h and picked at run time by HWY_DYNAMIC_DISPATCH.
//
// One read of the chunk, in blocks of kBlockVectors vectors, does three things per block:
//   1. Softmax statistics per lane: sum_lane = sum of exp(x - ref_lane). ref_lane is moved up only
//      when a block holds an entry more than kRefMargin above it, so the rescaling exp is rare
//      (at most once per 64 units of growth, not once per new max) and the common path is one
//      Sub + Exp + Add per vector. Why the margin is safe: exp(x - ref) <= e^64 ~ 6e27, and a lane
//      sums at most n / lanes such terms, with chunks of 2^14 entries e^64 * 2^14 ~ 1e32 < FLT_MAX
//      ~ 3.4e38 (the backend never passes a larger n); and entries more than 86 below ref count
//      as 0 (softmax_exp-inl.h), but they are more than 86 below the lane's true max too, so
//      below one f32 ulp of the sum.
//   2. Top-K admission: the block is compared against the buffer's threshold (one Le + And per
//      vector); only when some lane is not <= threshold does it take the admission path, which
//      appends the lanes above threshold (compress_admit-inl.h). A NaN fails every `<=`, so NaN
//      detection costs nothing on the common path: the admission path records it.
//   3. Special values (SPEC §3), without relying on exp for them: SoftmaxExp returns 0 for NaN
//      and -inf inputs (and x - ref is NaN for x = +inf or x = ref = -inf), so the sum itself never
//      sees them. NaN is recorded as has_nan; +inf drives ref to +inf and an only -inf chunk keeps
//      ref = -inf; the row combination turns all three into a NaN normalizer.
//
// Exp error: at most 2 f32 ulp relative over [-86, 64] (softmax_exp-inl.h; tested in
// optimized/cpu/test_cpu_backend.cpp against std::exp in double, on every target). The sum is
// accumulated per lane in f32 (at most 2^14 / lanes terms per chunk) and combined across lanes
// and chunks in double; log is taken once per row in double (std::log: one call per row needs no
// SIMD). The f32 part is summed in groups of blocks (kGroupBlocks), so its rounding chain stays
// short on every target: in a 30 s campaign under SPEC §5's rule alone, every target used at most
// 11% of the tolerance (the one-lane fallback used 85% with one chain per lane).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "row_kernel.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "hwy/highway.h"
#include "compress_admit-inl.h"
#include "row_kernel.hpp"
#include "softmax_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace logprobs::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<D>;
using V = hn::Vec<D>;

constexpr std::size_t kBlockVectors = CandidateBuffer::kBlockVectors;
static_assert(HWY_MAX_BYTES / sizeof(float) <= 16, "CandidateBuffer::kSlack assumes vectors of at most 16 floats");

constexpr float kRefMargin = 64.0f;

// Blocks summed into `group` before it is added to `sum`: a lane's f32 sum is then a chain of
// kGroupBlocks + n / (4 lanes kGroupBlocks) roundings instead of n / (4 lanes), which on the
// one-lane fallback (4096 for a chunk) would use most of SPEC §5's tolerance on rows where every
// addition rounds the same way.
constexpr std::size_t kGroupBlocks = 16;

struct LaneState {
  V ref;        // per-lane reference point of the sums
  V ref_limit;  // ref + kRefMargin: a block entry above it forces a rescale
  V sum;        // of exp(x - ref), over the groups done
  V group;      // of exp(x - ref), over the blocks of the current group
  V threshold;  // the buffer's admission threshold, broadcast
  bool has_nan;
};

// The rare part of admission, out of line: compaction and the ascending-row seed. Returns the
// new threshold.
HWY_NOINLINE float CompactOrSeed(CandidateBuffer& buffer, const float* ahead, std::uint64_t ahead_n) {
  if (buffer.over_capacity()) buffer.compact();
  if (buffer.wants_seed()) buffer.seed_from_ahead(ahead, ahead_n);
  return buffer.threshold();
}

// The admission path of one block: append the lanes above threshold, with their tokens, without
// a branch per vector (at large K, which vectors admit is unpredictable).
HWY_INLINE void AdmitBlock(const V* x, std::uint32_t first_token, LaneState& st, CandidateBuffer& buffer,
                           const float* ahead, std::uint64_t ahead_n) {
  const D d;
  const std::size_t lanes = hn::Lanes(d);
  for (std::size_t i = 0; i < kBlockVectors; ++i) {
    // Gt is false for NaN, and for -inf (threshold >= -inf).
    const std::uint32_t token = first_token + static_cast<std::uint32_t>(i * lanes);
    buffer.added(CompressAdmit(d, x[i], hn::Gt(x[i], st.threshold), token, buffer.value_tail(), buffer.token_tail()));
    // IsNaN, not Ne(x, x): Highway's Ne is an ordered compare on x86 (false for NaN).
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::IsNaN(x[i])))) st.has_nan = true;
  }
  if (HWY_UNLIKELY(buffer.over_capacity() || buffer.wants_seed())) {
    st.threshold = hn::Set(d, CompactOrSeed(buffer, ahead, ahead_n));
  }
}

// One block of kBlockVectors vectors at p (tokens first_token...). `ahead` is the part of the
// chunk not yet scanned, for the ascending-row seed.
HWY_INLINE void ScanBlock(const float* HWY_RESTRICT p, std::uint32_t first_token, LaneState& st,
                          CandidateBuffer& buffer, const float* ahead, std::uint64_t ahead_n) {
  const D d;
  const std::size_t lanes = hn::Lanes(d);
  V x[kBlockVectors];
  for (std::size_t i = 0; i < kBlockVectors; ++i) x[i] = hn::LoadU(d, p + i * lanes);

  static_assert(kBlockVectors == 4, "the reductions below are written for 4 vectors");
  const auto below = hn::And(hn::And(hn::Le(x[0], st.threshold), hn::Le(x[1], st.threshold)),
                             hn::And(hn::Le(x[2], st.threshold), hn::Le(x[3], st.threshold)));
  if (HWY_UNLIKELY(!hn::AllTrue(d, below))) AdmitBlock(x, first_token, st, buffer, ahead, ahead_n);

  const V block_max = hn::Max(hn::Max(x[0], x[1]), hn::Max(x[2], x[3]));
  if (HWY_UNLIKELY(!hn::AllTrue(d, hn::Le(block_max, st.ref_limit)))) {
    // Only lanes whose ref changes get a scale below 1; exp(-inf - -inf) = exp(NaN) is 0 here
    // (SoftmaxExp), harmless since such a lane's sum is still 0.
    const V new_ref = hn::Max(st.ref, block_max);
    const V scale = SoftmaxExp(d, hn::Sub(st.ref, new_ref));
    st.sum = hn::Mul(st.sum, scale);
    st.group = hn::Mul(st.group, scale);
    st.ref = new_ref;
    st.ref_limit = hn::Add(new_ref, hn::Set(d, kRefMargin));
  }
  // One accumulator, added a block at a time: fewer live vector registers (AVX2 has 16, and
  // exp's constants want most of them) and one dependent add per block instead of per vector.
  const V e01 = hn::Add(SoftmaxExp(d, hn::Sub(x[0], st.ref)), SoftmaxExp(d, hn::Sub(x[1], st.ref)));
  const V e23 = hn::Add(SoftmaxExp(d, hn::Sub(x[2], st.ref)), SoftmaxExp(d, hn::Sub(x[3], st.ref)));
  st.group = hn::Add(st.group, hn::Add(e01, e23));
}

ChunkStats ScanChunk(const float* x, std::uint64_t n, std::uint32_t first_token, CandidateBuffer& buffer) {
  const D d;
  const std::size_t lanes = hn::Lanes(d);
  const std::size_t block = kBlockVectors * lanes;
  const float neg_inf = -std::numeric_limits<float>::infinity();

  LaneState st;
  st.ref = hn::Set(d, neg_inf);
  st.ref_limit = st.ref;
  st.sum = hn::Zero(d);
  st.group = hn::Zero(d);
  st.threshold = hn::Set(d, buffer.threshold());
  st.has_nan = false;
  buffer.start_chunk();

  std::uint64_t j = 0;
  for (std::size_t blocks = 1; j + block <= n; j += block, ++blocks) {
    ScanBlock(x + j, first_token + static_cast<std::uint32_t>(j), st, buffer, x + j + block, n - j - block);
    if (blocks % kGroupBlocks == 0) {
      st.sum = hn::Add(st.sum, st.group);
      st.group = hn::Zero(d);
    }
  }
  if (j < n) {
    // The last partial block, padded with -inf: it never enters, and adds exp(-inf) = 0.
    HWY_ALIGN float tail[kBlockVectors * HWY_MAX_BYTES / sizeof(float)];
    for (std::size_t i = 0; i < block; ++i) tail[i] = j + i < n ? x[j + i] : neg_inf;
    ScanBlock(tail, first_token + static_cast<std::uint32_t>(j), st, buffer, x + n, 0);
  }

  // Lanes to one (ref, sum), in double and in lane order (fixed for a given target).
  const V lane_sums = hn::Add(st.sum, st.group);
  HWY_ALIGN float refs[HWY_MAX_BYTES / sizeof(float)];
  HWY_ALIGN float sums[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(st.ref, d, refs);
  hn::Store(lane_sums, d, sums);
  float ref = neg_inf;
  for (std::size_t l = 0; l < lanes; ++l) ref = refs[l] > ref ? refs[l] : ref;
  double sum = 0.0;
  if (std::isfinite(ref)) {
    for (std::size_t l = 0; l < lanes; ++l) {
      if (refs[l] > neg_inf) sum += double(sums[l]) * std::exp(double(refs[l]) - double(ref));
    }
  }
  return {ref, sum, st.has_nan};
}

const char* CurrentTargetName() { return hwy::TargetName(HWY_TARGET); }

void ExpForTest(const float* in, float* out, std::size_t n) {
  const D d;
  const std::size_t lanes = hn::Lanes(d);
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
  for (std::size_t i = 0; i < n; i += lanes) {
    const std::size_t m = std::min(lanes, n - i);
    for (std::size_t l = 0; l < lanes; ++l) buf[l] = l < m ? in[i + l] : 0.0f;
    hn::Store(SoftmaxExp(d, hn::Load(d, buf)), d, buf);
    std::memcpy(out + i, buf, m * sizeof(float));
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

ChunkStats scan_chunk(const float* x, std::uint64_t n, std::uint32_t first_token, CandidateBuffer& buffer) {
  return HWY_DYNAMIC_DISPATCH(ScanChunk)(x, n, first_token, buffer);
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

}  // namespace logprobs::cpu
#endif
