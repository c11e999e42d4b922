// The CTA-wide building blocks of the CUDA kernels (included by logprobs_kernels.cu only): the
// shared storage, a thread's coalesced loads and statistics, and the radix select over items
// held in registers with its warp-aggregated histogram, candidate floor and emit.
#pragma once

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda_plan.hpp"
#include "logprobs_cuda.hpp"

namespace logprobs {
namespace {

using namespace cuda_plan;

// Accurate expf/logf: the build never uses --use_fast_math (SPEC §3).
struct ExpF {
  __device__ float operator()(float x) const { return expf(x); }
};
struct LogF {
  __device__ float operator()(float x) const { return logf(x); }
};
struct CombineStats {
  __device__ PartialStats operator()(const PartialStats& a, const PartialStats& b) const {
    return combine_stats(a, b, ExpF{});
  }
};

using BlockReduceStats = cub::BlockReduce<PartialStats, kThreads>;
using BlockScanCounts = cub::BlockScan<unsigned long long, kThreads>;

struct SelectShared {
  std::uint32_t hist[kRadixBins];
  DigitPick pick;
  std::uint32_t total;
};

struct SharedStorage {
  union {
    typename BlockReduceStats::TempStorage reduce;
    typename BlockScanCounts::TempStorage scan;
  } cub;
  SelectShared select;
  float normalizer;
};

__device__ std::uint64_t item_offset(int item) { return quad_offset(item / 4, threadIdx.x) + std::uint64_t(item % 4); }

// This thread's 16 logits of x[start, start + len); entries past len read as -inf, which counts
// in neither the sums nor the candidates, exactly like a masked logit. The vector path needs a
// 16-byte aligned chunk start (row_stride and the logits pointer decide that); otherwise the
// same elements are read one by one into the same registers.
__device__ void load_chunk(const float* row, std::uint64_t start, std::uint64_t len, float (&x)[kItemsPerThread]) {
  const float* base = row + start;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(base) & 15u) == 0;
#pragma unroll
  for (int q = 0; q < kQuadsPerThread; ++q) {
    const std::uint64_t off = quad_offset(q, threadIdx.x);
    if (aligned && off + 4 <= len) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(base + off));
      x[4 * q + 0] = v.x;
      x[4 * q + 1] = v.y;
      x[4 * q + 2] = v.z;
      x[4 * q + 3] = v.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) x[4 * q + j] = off + j < len ? __ldg(base + off + j) : negative_infinity();
    }
  }
}

// Two passes over the registers (max, then sum) cost one exp per logit, against two for a
// running rescale; the per-thread order is fixed by the item order.
__device__ PartialStats thread_stats(const float (&x)[kItemsPerThread]) {
  PartialStats s = empty_stats();
#pragma unroll
  for (int i = 0; i < kItemsPerThread; ++i) {
    const std::uint32_t f = special_flags(x[i]);
    s.flags |= f;
    if (f == 0u && x[i] > s.max) s.max = x[i];
  }
  if (s.max > negative_infinity()) {
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      if (special_flags(x[i]) == 0u && x[i] > negative_infinity()) s.sum += expf(x[i] - s.max);
    }
  }
  return s;
}

// Warp 0 finds the bucket that holds the remaining-th largest key: each lane sums 8 bins from
// the top, an inclusive warp scan gives the running counts, the first lane to reach `remaining`
// walks its own bins (pick_digit_in_group, the same walk the CPU tests check).
__device__ void warp_pick(SelectShared& s, std::uint32_t remaining) {
  const int lane = int(threadIdx.x);
  const int top = lane_top_bin(lane);
  std::uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < kBinsPerLane; ++i) sum += s.hist[top - i];
  std::uint32_t inclusive = sum;
#pragma unroll
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const std::uint32_t v = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
    if (lane >= d) inclusive += v;
  }
  const std::uint32_t total = __shfl_sync(0xFFFFFFFFu, inclusive, kWarpSize - 1);
  const unsigned reached = __ballot_sync(0xFFFFFFFFu, inclusive >= remaining);
  if (lane == 0) s.total = total;
  if (total > remaining && lane == __ffs(int(reached)) - 1) {
    s.pick = pick_digit_in_group(s.hist, top, kBinsPerLane, inclusive - sum, remaining);
  }
}

// One radix pass's histogram is complete in s.hist: pick the digit and advance the state
// (every thread computes the same state from the same shared values).
__device__ RadixState finish_pass(RadixState st, SelectShared& s) {
  __syncthreads();
  if (threadIdx.x < kWarpSize) warp_pick(s, st.remaining);
  __syncthreads();
  return radix_step(st, s.total, s.pick);
}

// Adds one key's digit to the histogram, one atomic per distinct digit in the warp: logits
// crowd into a few top-byte bins, and 32 lanes hitting one shared address would serialize.
// Every lane of the warp calls this (the item loops are warp-uniform).
__device__ void histogram_add(SelectShared& s, bool counted, int digit) {
  const unsigned active = __ballot_sync(0xFFFFFFFFu, counted);
  if (counted) {
    const unsigned peers = __match_any_sync(active, digit);
    if (int(threadIdx.x % kWarpSize) == __ffs(int(peers)) - 1) atomicAdd(&s.hist[digit], unsigned(__popc(int(peers))));
  }
}

__device__ void clear_histogram(SelectShared& s) {
  for (int i = int(threadIdx.x); i < kRadixBins; i += kThreads) s.hist[i] = 0;
  __syncthreads();
}

// The K largest keys of the whole block's registers. Keys are recomputed from the values held
// (a few integer operations) rather than kept: 16 more live registers per thread would halve
// the CTAs an SM holds.
template <int Items, typename KeyOf>
__device__ SelectRule select_from_registers(KeyOf key_of, std::uint32_t k, SelectShared& s) {
  RadixState st = radix_begin(k);
  while (!st.done) {
    clear_histogram(s);
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t key = key_of(i);
      histogram_add(s, in_bucket(st, key), digit_of(st, key));
    }
    st = finish_pass(st, s);
  }
  return st.rule;
}

// A floor below which no item can be among the block's K largest (candidate_floor in
// cuda_plan.hpp says why): the K-th largest of the per-thread maxima, found by a select over one
// key per thread. Only worth it, and only valid as written, when K is below the thread count.
template <int Items, typename KeyOf>
__device__ std::uint32_t block_candidate_floor(KeyOf key_of, std::uint32_t k, SelectShared& s) {
  if (k >= std::uint32_t(kThreads)) return 1u;
  std::uint32_t best = 0;
#pragma unroll
  for (int i = 0; i < Items; ++i) best = max(best, key_of(i));
  return candidate_floor(select_from_registers<1>([&](int) { return best; }, k, s));
}

// Writes this block's selected keys: positions come from one exclusive scan of packed
// (above, tie) counts, offset by what earlier tiles selected. Returns the block's totals.
template <int Items, typename KeyOf, typename Write>
__device__ unsigned long long emit_selected(KeyOf key_of, const SelectRule& rule,
                                            typename BlockScanCounts::TempStorage& temp, std::uint64_t above_base,
                                            std::uint64_t ties_base, Write write) {
  std::uint32_t above = 0, ties = 0;
#pragma unroll
  for (int i = 0; i < Items; ++i) {
    const std::uint32_t key = key_of(i);
    above += is_above(rule, key) ? 1u : 0u;
    ties += is_tie(rule, key) ? 1u : 0u;
  }
  unsigned long long prefix = 0, aggregate = 0;
  BlockScanCounts(temp).ExclusiveSum(pack_counts(above, ties), prefix, aggregate);
  std::uint64_t above_before = above_base + above_count(prefix);
  std::uint64_t ties_before = ties_base + tie_count(prefix);
#pragma unroll
  for (int i = 0; i < Items; ++i) {
    const std::uint32_t key = key_of(i);
    const std::int64_t pos = emit_position(rule, key, above_before, ties_before);
    if (pos >= 0) write(i, std::uint64_t(pos));
    above_before += is_above(rule, key) ? 1u : 0u;
    ties_before += is_tie(rule, key) ? 1u : 0u;
  }
  return aggregate;
}

}  // namespace
}  // namespace logprobs
