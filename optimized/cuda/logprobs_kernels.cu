// The CUDA backend's kernels: log-softmax, top-K and the evaluated token's value of every output
// row, reading each logit once on the common path.
//
// Pass 1 (chunk_pass): one CTA per (output row, chunk of 8192 logits). Each thread loads its 16
// logits as four 16-byte quads and keeps them in registers; the CTA reduces (max, sum-exp) with
// CUB's BlockReduce and, when the row's candidates will fit pass 2's registers, radix-selects
// the chunk's own top-K from registers and writes it to the workspace.
// Pass 2 (row_pass): one CTA per output row combines the row's chunk partials in chunk order
// into the normalizer, selects the row's top-K from the chunks' candidates (register path) or
// by a radix select streamed over the row again (large K or huge V), and writes the outputs.
//
// Why this is deterministic and batch-invariant (SPEC §6): every reduction has a fixed shape
// given V (chunk size is a constant, CUB's block primitives reduce in a fixed order, partials
// are combined in chunk order), a thread's items are the same on the vector and scalar load
// paths, and the only atomics are integer histogram counts, whose sums do not depend on order.
// Every output position comes from a block-wide exclusive scan, never from an atomic counter.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

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
                                            typename BlockScanCounts::TempStorage& temp,
                                            std::uint64_t above_base, std::uint64_t ties_base, Write write) {
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

__device__ DeviceRowTask row_task(const DeviceBatch& b, std::uint64_t output_row) {
  return map_output_row(output_row, b.batch_size, b.lp_output_offsets, b.logit_row_offsets, b.token_row_offsets,
                        b.tokens, b.sampled_tokens);
}

// SelectTopK false: statistics only (levels 0, or the streamed select), which needs far fewer
// registers than the select and so keeps more CTAs in flight per SM.
template <bool SelectTopK>
__global__ void __launch_bounds__(kThreads) chunk_pass(DeviceBatch b, LaunchPlan p, std::uint64_t row_begin,
                                                       std::uint64_t rows, ChunkStats* stats, Candidate* candidates) {
  __shared__ SharedStorage sh;
  const std::uint64_t work = rows * p.splits;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::uint64_t chunk = w % p.splits;
    const DeviceRowTask task = row_task(b, row_begin + w / p.splits);
    const float* row = b.logits + task.logit_row * b.row_stride;
    const std::uint64_t start = chunk * kChunkElems;
    const std::uint64_t len = b.vocab - start < kChunkElems ? b.vocab - start : kChunkElems;

    float x[kItemsPerThread];
    load_chunk(row, start, len, x);
    const PartialStats chunk_stats = BlockReduceStats(sh.cub.reduce).Reduce(thread_stats(x), CombineStats{});

    std::uint32_t kept = 0;
    if constexpr (SelectTopK) {
      // The select reads the logits from shared memory, each thread only its own (bank-conflict
      // free: item i of thread t at i * 512 + t). Held in registers across the select's passes
      // they cost ~120 registers a thread, one CTA per SM, and no overlap of one CTA's loads
      // with another's select.
      __shared__ float tile[kItemsPerThread * kThreads];
#pragma unroll
      for (int i = 0; i < kItemsPerThread; ++i) tile[i * kThreads + threadIdx.x] = x[i];
      __syncthreads();  // also: the scan below reuses the reduce's shared memory
      const auto value = [&](int i) { return tile[i * kThreads + threadIdx.x]; };
      const auto raw_key = [&](int i) { return radix_key(value(i)); };
      const std::uint32_t floor = block_candidate_floor<kItemsPerThread>(raw_key, p.k, sh.select);
      const auto key_of = [&](int i) { return filter_key(radix_key(value(i)), floor); };
      const SelectRule rule = select_from_registers<kItemsPerThread>(key_of, p.k, sh.select);
      Candidate* out = candidates + w * p.k;
      emit_selected<kItemsPerThread>(key_of, rule, sh.cub.scan, 0, 0, [&](int i, std::uint64_t pos) {
        out[pos] = Candidate{value(i), std::uint32_t(start + item_offset(i))};
      });
      kept = rule.selected;
    }
    if (threadIdx.x == 0) stats[w] = ChunkStats{chunk_stats, kept};
    __syncthreads();  // the next work item reuses shared memory
  }
}

// The K largest logits of a whole row, streamed from memory: a histogram pass per radix digit
// (at most four), then a pass that writes the selected entries in row order. For large K and
// huge V only; the row is usually still in L2 from pass 1.
template <typename Write>
__device__ std::uint32_t select_streaming(const float* row, std::uint64_t vocab, std::uint32_t k, SharedStorage& sh,
                                          Write write) {
  const std::uint64_t tiles = splits_for_vocab(vocab);
  RadixState st = radix_begin(k);
  while (!st.done) {
    clear_histogram(sh.select);
    for (std::uint64_t tile = 0; tile < tiles; ++tile) {
      const std::uint64_t start = tile * kChunkElems;
      float x[kItemsPerThread];
      load_chunk(row, start, vocab - start < kChunkElems ? vocab - start : kChunkElems, x);
#pragma unroll
      for (int i = 0; i < kItemsPerThread; ++i) {
        const std::uint32_t key = radix_key(x[i]);
        histogram_add(sh.select, in_bucket(st, key), digit_of(st, key));
      }
    }
    st = finish_pass(st, sh.select);
  }
  std::uint64_t above_base = 0, ties_base = 0;
  for (std::uint64_t tile = 0; tile < tiles; ++tile) {
    const std::uint64_t start = tile * kChunkElems;
    float x[kItemsPerThread];
    load_chunk(row, start, vocab - start < kChunkElems ? vocab - start : kChunkElems, x);
    const unsigned long long total = emit_selected<kItemsPerThread>([&](int i) { return radix_key(x[i]); }, st.rule, sh.cub.scan, above_base, ties_base,
                                                   [&](int i, std::uint64_t pos) {
                                                     write(pos, x[i], std::uint32_t(start + item_offset(i)));
                                                   });
    above_base += above_count(total);
    ties_base += tie_count(total);
    __syncthreads();  // the next tile's scan reuses the temp storage
  }
  return st.rule.selected;
}

template <bool RegisterMerge>
__global__ void __launch_bounds__(kThreads) row_pass(DeviceBatch b, LaunchPlan p, std::uint64_t row_begin,
                                                     std::uint64_t rows, const ChunkStats* stats,
                                                     const Candidate* candidates, DeviceOutput out) {
  __shared__ SharedStorage sh;
  const std::uint64_t width = std::uint64_t(p.k) + 1;
  for (std::uint64_t local = blockIdx.x; local < rows; local += gridDim.x) {
    const std::uint64_t o = row_begin + local;
    const DeviceRowTask task = row_task(b, o);
    const float* row = b.logits + task.logit_row * b.row_stride;
    const ChunkStats* row_stats = stats + local * p.splits;

    // Thread t combines chunks t, t + 512, ... in order, then the fixed block tree.
    PartialStats mine = empty_stats();
    for (std::uint64_t c = threadIdx.x; c < p.splits; c += kThreads) mine = combine_stats(mine, row_stats[c].stats, ExpF{});
    const PartialStats total = BlockReduceStats(sh.cub.reduce).Reduce(mine, CombineStats{});
    if (threadIdx.x == 0) sh.normalizer = normalizer(total, LogF{});
    __syncthreads();
    const float n = sh.normalizer;
    float* values = out.lp_logits + o * width;
    std::uint32_t* tokens = out.lp_tokens + o * width;

    std::uint32_t selected = 0;
    if (p.k > 0) {
      if constexpr (RegisterMerge) {
        // Chunk c's candidate j is item c * K + j; only the first `kept` of a chunk are written.
        const Candidate* row_candidates = candidates + local * p.splits * p.k;
        const std::uint64_t items = p.splits * p.k;
        // An empty item holds -inf, whose key (0) is never a candidate.
        Candidate held[kItemsPerThread];
#pragma unroll
        for (int i = 0; i < kItemsPerThread; ++i) {
          const std::uint64_t e = std::uint64_t(i) * kThreads + threadIdx.x;
          held[i] = Candidate{negative_infinity(), 0u};
          if (e < items && e % p.k < row_stats[e / p.k].kept) held[i] = row_candidates[e];
        }
        const auto raw_key = [&](int i) { return radix_key(held[i].value); };
        const std::uint32_t floor = block_candidate_floor<kItemsPerThread>(raw_key, p.k, sh.select);
        const auto key_of = [&](int i) { return filter_key(radix_key(held[i].value), floor); };
        const SelectRule rule = select_from_registers<kItemsPerThread>(key_of, p.k, sh.select);
        emit_selected<kItemsPerThread>(key_of, rule, sh.cub.scan, 0, 0, [&](int i, std::uint64_t pos) {
          values[pos] = held[i].value + n;
          tokens[pos] = held[i].token;
        });
        selected = rule.selected;
      } else {
        selected = select_streaming(row, b.vocab, p.k, sh, [&](std::uint64_t pos, float x, std::uint32_t token) {
          values[pos] = x + n;
          tokens[pos] = token;
        });
      }
    }
    // Fewer candidates than K: padding (V, -inf + n), NaN when n is (SPEC §3).
    for (std::uint64_t slot = selected + threadIdx.x; slot < p.k; slot += kThreads) {
      values[slot] = negative_infinity() + n;
      tokens[slot] = std::uint32_t(b.vocab);
    }
    if (threadIdx.x == 0) {
      values[p.k] = __ldg(row + task.token) + n;
      tokens[p.k] = task.token;
    }
    __syncthreads();  // the next row reuses shared memory
  }
}

// Grid-stride loops cover any amount of work; this caps a launch at a sane size.
constexpr std::uint32_t kMaxCtas = 1u << 20;

}  // namespace

std::size_t cuda_workspace_bytes(std::uint64_t output_rows, std::uint64_t vocab, int levels) {
  return output_rows == 0 ? 0 : std::size_t(plan_launch(output_rows, vocab, levels).workspace_bytes);
}

cudaError_t cuda_logprobs(const DeviceBatch& batch, int levels, const DeviceOutput& out, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream) {
  if (levels < 0 || levels > 16) return cudaErrorInvalidValue;
  if (batch.output_rows == 0) return cudaSuccess;
  const LaunchPlan p = plan_launch(batch.output_rows, batch.vocab, levels);
  if (workspace == nullptr || workspace_bytes < p.workspace_bytes) return cudaErrorInvalidValue;
  auto* stats = static_cast<ChunkStats*>(workspace);
  auto* candidates = reinterpret_cast<Candidate*>(static_cast<char*>(workspace) +
                                                  round_up_256(p.rows_per_group * p.stats_bytes_per_row));
  for (std::uint64_t g = 0; g < p.groups; ++g) {
    const std::uint64_t row_begin = g * p.rows_per_group;
    const std::uint64_t rows =
        batch.output_rows - row_begin < p.rows_per_group ? batch.output_rows - row_begin : p.rows_per_group;
    const std::uint32_t chunk_ctas = grid_size(rows * p.splits, kMaxCtas);
    if (p.register_merge && p.k > 0) {
      chunk_pass<true><<<chunk_ctas, kThreads, 0, stream>>>(batch, p, row_begin, rows, stats, candidates);
    } else {
      chunk_pass<false><<<chunk_ctas, kThreads, 0, stream>>>(batch, p, row_begin, rows, stats, candidates);
    }
    if (p.register_merge) {
      row_pass<true><<<grid_size(rows, kMaxCtas), kThreads, 0, stream>>>(batch, p, row_begin, rows, stats, candidates,
                                                                         out);
    } else {
      row_pass<false><<<grid_size(rows, kMaxCtas), kThreads, 0, stream>>>(batch, p, row_begin, rows, stats, candidates,
                                                                          out);
    }
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t cuda_kernels_loadable() {
  cudaFuncAttributes attributes{};
  if (const cudaError_t err = cudaFuncGetAttributes(&attributes, chunk_pass<true>); err != cudaSuccess) return err;
  if (const cudaError_t err = cudaFuncGetAttributes(&attributes, chunk_pass<false>); err != cudaSuccess) return err;
  if (const cudaError_t err = cudaFuncGetAttributes(&attributes, row_pass<true>); err != cudaSuccess) return err;
  return cudaFuncGetAttributes(&attributes, row_pass<false>);
}

}  // namespace logprobs
