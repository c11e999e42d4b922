// The CTA-wide steps of the CUDA kernels (included by the .cu files only): a segment's
// statistics, histograms and the digit pick, the radix select over a CTA's 1024 items, the emit in
// item order, a row's tree in its root CTA, and the last-arrival counter that fuses each merge
// into the pass before it. Every decision inside them is a function of cuda_select.hpp or
// segment_math.hpp, which the host model calls too; what is here is only how 128 threads share
// the work (shuffles, ballots, shared memory, atomics on integer counts).
#pragma once

#include <cstdint>

#include "cuda_plan.hpp"
#include "segment_math.hpp"

namespace logprobs::cuda_kernels {

using namespace cuda_plan;

__device__ __forceinline__ int lane_id() { return int(threadIdx.x) & 31; }
__device__ __forceinline__ int warp_id() { return int(threadIdx.x) >> 5; }

// ---- A segment's statistics ----------------------------------------------------------------------

struct SegmentShared {
  float e[kSegment];  // the segment's terms; then the root's tree (as canonical::Partial)
  float lanes[canonical::kLanes];
  float max[kWarps];
  std::uint32_t flags[kWarps];
  std::uint32_t count[kWarps];
};

// The CTA's max, flags and count, the same in every thread: each warp's lane 0 writes its
// warp's, and every thread combines the warps' in warp order.
__device__ inline ThreadStats block_stats(ThreadStats s, SegmentShared& sh) {
#pragma unroll
  for (int d = 16; d >= 1; d /= 2) {
    s.max = max_of(s.max, __shfl_xor_sync(0xFFFFFFFFu, s.max, d));
    s.flags |= __shfl_xor_sync(0xFFFFFFFFu, s.flags, d);
    s.at_least_xs += __shfl_xor_sync(0xFFFFFFFFu, s.at_least_xs, d);
  }
  if (lane_id() == 0) {
    sh.max[warp_id()] = s.max;
    sh.flags[warp_id()] = s.flags;
    sh.count[warp_id()] = s.at_least_xs;
  }
  __syncthreads();
  ThreadStats all{sh.max[0], sh.flags[0], sh.count[0]};
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    all.max = max_of(all.max, sh.max[w]);
    all.flags |= sh.flags[w];
    all.at_least_xs += sh.count[w];
  }
  __syncthreads();  // the next call may write at once
  return all;
}

// x[r] is entry item_of(r, thread) of a segment of n entries (-inf past n). The terms go through
// shared memory so that 16 threads can each sum one logical lane in the definition's order.
__device__ inline SegStats segment_stats(const float (&x)[kRounds], std::uint64_t n, float xs, SegmentShared& sh) {
  ThreadStats mine = thread_stats_begin();
#pragma unroll
  for (int r = 0; r < kRounds; ++r) thread_stats_add(mine, x[r], item_of(r, threadIdx.x) < n, xs);
  const ThreadStats all = block_stats(mine, sh);
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const std::uint64_t j = item_of(r, threadIdx.x);
    sh.e[j] = exp_term(x[r], all.max, j < n);
  }
  __syncthreads();
  if (threadIdx.x < canonical::kLanes) sh.lanes[threadIdx.x] = lane_sum(sh.e, int(threadIdx.x));
  __syncthreads();
  return {all.max, canonical::lane_tree(sh.lanes), all.flags, all.at_least_xs};
}

// ---- Histograms and the digit pick ---------------------------------------------------------------

template <int Bins>
struct Histogram {
  std::uint32_t bins[Bins];
  DigitPick pick;
  std::uint32_t total;
};

template <int Bins>
__device__ void hist_clear(Histogram<Bins>& h) {
  for (int i = int(threadIdx.x); i < Bins; i += kThreads) h.bins[i] = 0;
  __syncthreads();
}

// One atomic per distinct digit in the warp: keys crowd into few top bins, and 32 lanes hitting
// one shared address would serialize. Every lane of the warp calls this (the loops are uniform).
__device__ __forceinline__ void hist_add(std::uint32_t* bins, bool counted, int digit) {
  const unsigned active = __ballot_sync(0xFFFFFFFFu, counted);
  if (counted) {
    const unsigned peers = __match_any_sync(active, digit);
    if (lane_id() == __ffs(int(peers)) - 1) atomicAdd(&bins[digit], unsigned(__popc(int(peers))));
  }
}

// Warp 0: lane l sums bins [top - per + 1, top], top = bins - 1 - per l (lane 0 the highest); an
// inclusive scan gives the running counts from the top; the first lane to reach `remaining`
// walks its own bins with pick_digit_in_group (the walk the host runs over all bins).
__device__ inline void warp_pick(const std::uint32_t* bins, int count, std::uint32_t remaining, DigitPick* pick,
                                 std::uint32_t* total) {
  const int lane = lane_id(), per = count / 32, top = count - 1 - per * lane;
  std::uint32_t sum = 0;
  for (int i = 0; i < per; ++i) sum += bins[top - i];
  std::uint32_t inclusive = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const std::uint32_t v = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
    if (lane >= d) inclusive += v;
  }
  const std::uint32_t all = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
  const unsigned reached = __ballot_sync(0xFFFFFFFFu, inclusive >= remaining);
  if (lane == 0) *total = all;
  if (all > remaining && lane == __ffs(int(reached)) - 1)
    *pick = pick_digit_in_group(bins, top, per, inclusive - sum, remaining);
}

// The histogram of the state's current digit is complete in h: pick and step (every thread
// computes the same state from the same shared values).
template <int Bins>
__device__ RadixState finish_histogram(RadixState st, Histogram<Bins>& h) {
  __syncthreads();
  if (threadIdx.x < 32) warp_pick(h.bins, digit_bins(st.digits, st.level), st.remaining, &h.pick, &h.total);
  __syncthreads();
  return radix_step(st, h.total, h.pick);
}

// Adds the CTA's counts to a row's histogram in global memory (integer sums: any order).
template <int Bins>
__device__ void hist_flush(const Histogram<Bins>& h, std::uint32_t* row_bins, int count) {
  __syncthreads();
  for (int i = int(threadIdx.x); i < count; i += kThreads)
    if (h.bins[i] != 0) atomicAdd(&row_bins[i], h.bins[i]);
}

// A row's histogram, complete (every CTA of the row flushed before the last arrived), into h.
template <int Bins>
__device__ void hist_load(Histogram<Bins>& h, const std::uint32_t* row_bins, int count) {
  __syncthreads();
  for (int i = int(threadIdx.x); i < count; i += kThreads) h.bins[i] = __ldcg(&row_bins[i]);
}

// ---- The radix select over a CTA's items (item_of(r, thread), r < Items) ------------------------

template <int Items, typename KeyOf>
__device__ SelectRule radix_select(KeyOf key_of, std::uint32_t k, Histogram<256>& h) {
  RadixState st = radix_begin(k, Digits::block);
  while (!st.done) {
    hist_clear(h);
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t key = key_of(i);
      hist_add(h.bins, in_bucket(st, key), digit_of(st, key));
    }
    st = finish_histogram(st, h);
  }
  return st.rule;
}

// The K largest of the CTA's keys (key 0: no item), after the thread-maxima floor
// (candidate_floor in cuda_select.hpp), which only K < 128 allows. The rule reads unfiltered keys.
template <typename KeyOf>
__device__ SelectRule block_select(KeyOf key_of, std::uint32_t k, Histogram<256>& h) {
  std::uint32_t floor = 1u;
  if (k < std::uint32_t(kThreads)) {
    std::uint32_t best = 0u;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) best = max(best, key_of(r));
    floor = candidate_floor(radix_select<1>([&](int) { return best; }, k, h));
  }
  return on_unfiltered_keys(radix_select<kRounds>([&](int r) { return filter_key(key_of(r), floor); }, k, h), floor);
}

// ---- The emit ------------------------------------------------------------------------------------

struct EmitShared {
  std::uint32_t counts[kRounds * kWarps];  // per (round, warp): above << 16 | ties, then their prefix
  std::uint32_t total;
};

// Calls write(r, position) for each selected item, positions in item order (emit_position) after
// `above_base` above keys and `ties_base` tie keys of earlier CTAs. Returns the CTA's counts,
// above << 16 | ties (each at most 1024).
template <typename KeyOf, typename Write>
__device__ std::uint32_t block_emit(KeyOf key_of, const SelectRule& rule, std::uint64_t above_base,
                                    std::uint64_t ties_base, EmitShared& sh, Write write) {
  unsigned above[kRounds], ties[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const std::uint32_t key = key_of(r);
    above[r] = __ballot_sync(0xFFFFFFFFu, is_above(rule, key));
    ties[r] = __ballot_sync(0xFFFFFFFFu, is_tie(rule, key));
  }
  if (lane_id() == 0) {
#pragma unroll
    for (int r = 0; r < kRounds; ++r)
      sh.counts[r * kWarps + warp_id()] =
          (std::uint32_t(__popc(int(above[r]))) << 16) | std::uint32_t(__popc(int(ties[r])));
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scan of the 32 counts in item order: round, then warp
    const std::uint32_t v = sh.counts[threadIdx.x];
    std::uint32_t inclusive = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const std::uint32_t u = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
      if (lane_id() >= d) inclusive += u;
    }
    sh.counts[threadIdx.x] = inclusive - v;
    if (threadIdx.x == 31) sh.total = inclusive;
  }
  __syncthreads();
  const unsigned before = (1u << lane_id()) - 1u;  // the lanes below this one
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const std::uint32_t prefix = sh.counts[r * kWarps + warp_id()];
    const std::uint64_t above_before = above_base + (prefix >> 16) + unsigned(__popc(int(above[r] & before)));
    const std::uint64_t ties_before = ties_base + (prefix & 0xFFFFu) + unsigned(__popc(int(ties[r] & before)));
    const std::int64_t pos = emit_position(rule, key_of(r), above_before, ties_before);
    if (pos >= 0) write(r, std::uint64_t(pos));
  }
  const std::uint32_t total = sh.total;
  __syncthreads();
  return total;
}

// ---- Last arrival: the merge fused into the pass ---------------------------------------------

// True in every thread of the CTA that is the last of `expected` to arrive at `counter`. Each
// thread's writes are fenced before the arrival, and the last CTA fences before it reads the
// others' (which it reads with __ldcg, from L2, never a stale L1 line). Which CTA is last changes
// nothing but where the merge runs: every merge reads its inputs in a fixed order.
__device__ inline bool arrive_last(std::uint32_t* counter, std::uint64_t expected, bool& last) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) + 1u == std::uint32_t(expected);
  __syncthreads();
  const bool is_last = last;
  if (is_last) __threadfence();
  return is_last;
}

// ---- A row's statistics, in its root CTA ---------------------------------------------------------

// Part j of a tree level written by other CTAs or earlier levels (read from L2): the segments'
// partials when `level` is null.
__device__ __forceinline__ canonical::Partial load_part(const SegStats* seg, const canonical::Partial* level,
                                                        std::uint64_t j) {
  canonical::Partial p;
  p.max = level == nullptr ? __ldcg(&seg[j].max) : __ldcg(&level[j].max);
  p.sum = level == nullptr ? __ldcg(&seg[j].sum) : __ldcg(&level[j].sum);
  return p;
}

// The pairwise tree over the row's segment partials (written by other CTAs), level by level: in
// global scratch while a level has more than kSharedTreeParts parts, then in shared memory
// (sh.e, free after segment_stats), ping-ponging between its halves.
__device__ inline RowStats root_stats(const SegStats* seg, std::uint64_t segments, canonical::Partial* scratch,
                                      SegmentShared& sh) {
  ThreadStats mine = thread_stats_begin();
  for (std::uint64_t i = threadIdx.x; i < segments; i += kThreads) {
    mine.flags |= __ldcg(&seg[i].flags);
    mine.at_least_xs += __ldcg(&seg[i].at_least_xs);
  }
  const ThreadStats all = block_stats(mine, sh);
  std::uint64_t count = segments;
  const canonical::Partial* level = nullptr;  // null: the segments themselves
  while (count > kSharedTreeParts) {
    const std::uint64_t next = (count + 1) / 2;
    for (std::uint64_t i = threadIdx.x; i < next; i += kThreads)
      scratch[i] = tree_node([=](std::uint64_t j) { return load_part(seg, level, j); }, count, i);
    __syncthreads();
    level = scratch;
    scratch += next;
    count = next;
  }
  auto* parts = reinterpret_cast<canonical::Partial*>(sh.e);
  for (std::uint64_t i = threadIdx.x; i < count; i += kThreads) parts[i] = load_part(seg, level, i);
  __syncthreads();
  canonical::Partial* src = parts;
  canonical::Partial* dst = parts + kSharedTreeParts;
  while (count > 1) {
    const std::uint64_t next = (count + 1) / 2;
    for (std::uint64_t i = threadIdx.x; i < next; i += kThreads)
      dst[i] = tree_node([=](std::uint64_t j) { return src[j]; }, count, i);
    __syncthreads();
    canonical::Partial* t = src;
    src = dst;
    dst = t;
    count = next;
  }
  const canonical::Partial row = src[0];
  __syncthreads();  // sh.e is free again
  return {canonical::normalizer(row, all.flags), all.at_least_xs};
}

}  // namespace logprobs::cuda_kernels
