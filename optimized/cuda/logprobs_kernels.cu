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
#include <cstdint>

#include "block_select.cuh"
#include "cuda_plan.hpp"
#include "logprobs_cuda.hpp"

namespace logprobs {
namespace {

using namespace cuda_plan;

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
