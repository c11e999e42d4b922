// The CUDA backend's kernels for every path (cuda_plan.hpp says which a (V, K) takes), and
// cuda_logprobs. Per group of output rows:
//   prepare_rows   one CTA per row: its logit row, evaluated token, temperature and x_s, and its
//                  counters and histograms zeroed.
//   first_pass<P>  one CTA per (row, segment of 1024): the segment's canonical partial, flags and
//                  rank count; then, by path, nothing more (stats_only), the segment's top-K and the
//                  merges up the tree (merge_tree), or the row histogram of the first key digit
//                  (threshold). The last CTA to finish a row (a node, for merge_tree) goes on to
//                  the row's root work, so no merge waits for a launch of its own.
//   the threshold path's four passes over compacted entries (threshold_kernels.cu).
//
// Why the bits are SPEC §8's and do not depend on the launch (SPEC §6): every sum has the
// definition's order (segment_math.hpp; the root reduces the segments' partials by the pairwise
// tree in a fixed order, whichever CTA is last), the selection is exact under one total order, and
// every output position is a count of selected items before it in token order. Atomics only add
// integers (histograms, arrival counters).
#include <cstdint>

#include "kernel_args.cuh"
#include "logprobs_cuda.hpp"

namespace logprobs {
namespace cuda_kernels {
namespace {

__global__ void __launch_bounds__(kThreads) prepare_rows(Args a) {
  const std::uint64_t local = blockIdx.x;
  if (threadIdx.x == 0) a.ws.rows[local] = row_info_of(a, local);
  std::uint32_t* zeroed = row_counter(a.ws, a.plan, local, 0);
  for (std::uint64_t i = threadIdx.x; i < a.plan.zeroed_words_per_row; i += kThreads) zeroed[i] = 0;
}

// Shared memory by path: only what the path uses, so that the statistics-only pass keeps the
// most CTAs in flight.
template <Path P>
struct FirstPassShared {
  SegmentShared seg;
  Histogram<P == Path::threshold ? kRowBins : (P == Path::merge_tree ? 256 : 32)> hist;
  EmitShared emit;
  bool last;
};

__device__ RowStats row_stats_of(const Args& a, std::uint64_t local, SegmentShared& sh) {
  const std::uint64_t first = row_segment(a.plan, local, 0);
  return root_stats(a.ws.seg + first, a.plan.segments, a.ws.scratch + first, sh);
}

// The root of a merge tree: the row's statistics, then its top slots from the root's selection.
__device__ void write_root(const Args& a, std::uint64_t local, const SelectRule& rule, const float (&v)[kRounds],
                           const std::uint32_t (&token)[kRounds], FirstPassShared<Path::merge_tree>& sh) {
  const RowStats row = row_stats_of(a, local, sh.seg);
  const std::uint64_t o = a.row_begin + local, width = std::uint64_t(a.plan.k) + 1;
  float* values = a.out.lp_logits + o * width;
  std::uint32_t* tokens = a.out.lp_tokens + o * width;
  block_emit([&](int r) { return radix_key(v[r]); }, rule, 0, 0, sh.emit,
             [&](int r, std::uint64_t pos) {
               values[pos] = canonical::output_value(v[r], row.normalizer);
               tokens[pos] = token[r];
             });
  write_row_tail(a, local, row, rule.selected, int(threadIdx.x), kThreads);
}

// The segment's own top-K, then, for as long as this CTA is the last child of its parent, the
// parent's merge of its children's lists (at most F K = 1024 items), up to the root.
__device__ void merge_up(const Args& a, std::uint64_t local, std::uint64_t segment, const float (&x)[kRounds],
                         FirstPassShared<Path::merge_tree>& sh) {
  const LaunchPlan& p = a.plan;
  float v[kRounds];
  std::uint32_t token[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    v[r] = x[r];
    token[r] = std::uint32_t(segment * kSegment + item_of(r, threadIdx.x));
  }
  const auto key_of = [&](int r) { return radix_key(v[r]); };
  int level = 0;
  std::uint64_t node = segment;
  for (;;) {
    const SelectRule rule = block_select(key_of, p.k, sh.hist);
    if (level == p.tree.depth) return write_root(a, local, rule, v, token, sh);
    Candidate* list = node_list(a.ws, p, local, level, node);
    block_emit(key_of, rule, 0, 0, sh.emit, [&](int r, std::uint64_t pos) { list[pos] = Candidate{v[r], token[r]}; });
    if (threadIdx.x == 0) *node_count(a.ws, p, local, level, node) = rule.selected;
    node /= p.tree.fan_in;
    ++level;
    if (!arrive_last(node_counter(a.ws, p, local, level, node), children_of(p.tree, level, node), sh.last)) return;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      const Candidate c = merge_candidate(a, local, level, node, item_of(r, threadIdx.x));
      v[r] = c.value;
      token[r] = c.token;
    }
  }
}

// The threshold path's first histogram: every candidate's top 11 key bits, added to the row's.
__device__ void count_first_digit(const Args& a, std::uint64_t local, const float (&x)[kRounds],
                                  Histogram<kRowBins>& h) {
  const RadixState st = radix_begin(a.plan.k, Digits::row);
  hist_clear(h);
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const std::uint32_t key = radix_key(x[r]);
    hist_add(h.bins, in_bucket(st, key), digit_of(st, key));
  }
  hist_flush(h, row_histogram(a.ws, a.plan, local, 0), kRowBins);
}

// The last CTA of a row (stats_only, threshold): the row's statistics and its tail; for the
// threshold path also the first digit's pick and the row state for the passes after this one.
template <Path P>
__device__ void finish_row(const Args& a, std::uint64_t local, FirstPassShared<P>& sh) {
  const RowStats row = row_stats_of(a, local, sh.seg);
  std::uint32_t selected = 0;
  if constexpr (P == Path::threshold) {
    hist_load(sh.hist, row_histogram(a.ws, a.plan, local, 0), kRowBins);
    const RadixState st = finish_histogram(radix_begin(a.plan.k, Digits::row), sh.hist);
    selected = sh.hist.total < a.plan.k ? sh.hist.total : a.plan.k;  // the row's candidates, at most K
    if (threadIdx.x == 0) a.ws.select[local] = RowSelect{row.normalizer, st};
  }
  write_row_tail(a, local, row, selected, int(threadIdx.x), kThreads);
}

template <Path P>
__global__ void __launch_bounds__(kThreads) first_pass(Args a) {
  __shared__ FirstPassShared<P> sh;
  const LaunchPlan& p = a.plan;
  const std::uint64_t local = blockIdx.x / p.segments, segment = blockIdx.x % p.segments;
  const RowInfo info = a.ws.rows[local];
  float x[kRounds];
  const std::uint64_t n = load_segment(a, info, segment, int(threadIdx.x), x);
  const SegStats stats = segment_stats(x, n, info.xs, sh.seg);
  if (threadIdx.x == 0) a.ws.seg[row_segment(p, local, segment)] = stats;
  if constexpr (P == Path::merge_tree) {
    merge_up(a, local, segment, x, sh);
  } else {
    if constexpr (P == Path::threshold) count_first_digit(a, local, x, sh.hist);
    if (arrive_last(row_counter(a.ws, p, local, 0), p.segments, sh.last)) finish_row<P>(a, local, sh);
  }
}

}  // namespace
}  // namespace cuda_kernels

std::size_t cuda_workspace_bytes(std::uint64_t output_rows, std::uint64_t vocab, std::uint32_t k) {
  if (output_rows == 0 || k > cuda_plan::kMaxK) return 0;
  return std::size_t(cuda_plan::plan_launch(output_rows, vocab, k).workspace_bytes);
}

cudaError_t cuda_logprobs(const DeviceBatch& batch, std::uint32_t k, const DeviceOutput& out, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream) {
  using namespace cuda_kernels;
  if (k > kMaxK) return cudaErrorInvalidValue;
  if (batch.output_rows == 0) return cudaSuccess;
  const LaunchPlan p = plan_launch(batch.output_rows, batch.vocab, k);
  if (workspace == nullptr || workspace_bytes < p.workspace_bytes) return cudaErrorInvalidValue;
  const Workspace ws = workspace_at(workspace, layout_for(p, p.rows_per_group));
  for (std::uint64_t g = 0; g < p.groups; ++g) {
    const std::uint64_t row_begin = g * p.rows_per_group;
    const std::uint64_t left = batch.output_rows - row_begin;
    const Args a{batch, out, p, ws, row_begin, left < p.rows_per_group ? left : p.rows_per_group};
    // One CTA per work item: the workspace bounds a group to fewer than 2^31 (cuda_plan.hpp).
    prepare_rows<<<unsigned(a.rows), kThreads, 0, stream>>>(a);
    const unsigned ctas = unsigned(first_pass_ctas(p, a.rows));
    switch (p.path) {
      case Path::stats_only:
        first_pass<Path::stats_only><<<ctas, kThreads, 0, stream>>>(a);
        break;
      case Path::merge_tree:
        first_pass<Path::merge_tree><<<ctas, kThreads, 0, stream>>>(a);
        break;
      case Path::threshold:
        first_pass<Path::threshold><<<ctas, kThreads, 0, stream>>>(a);
        if (const cudaError_t err = launch_threshold_passes(a, stream); err != cudaSuccess) return err;
        break;
    }
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t cuda_kernels_loadable() {
  using namespace cuda_kernels;
  cudaFuncAttributes attributes{};
  for (const void* kernel :
       {reinterpret_cast<const void*>(prepare_rows), reinterpret_cast<const void*>(first_pass<Path::stats_only>),
        reinterpret_cast<const void*>(first_pass<Path::merge_tree>),
        reinterpret_cast<const void*>(first_pass<Path::threshold>)}) {
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel); err != cudaSuccess) return err;
  }
  return threshold_kernels_loadable();
}

}  // namespace logprobs
