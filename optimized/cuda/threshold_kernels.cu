// The threshold path's passes after pass 1 (large K; cuda_plan.hpp): one CTA per (row, segment)
// each, and in each the last CTA of a row to finish does the row's step.
//   second_pass  reads the segment again (the row's second and last read) and compacts the entries
//                at or above the threshold bucket into the segment's slice, in token order; counts
//                the next digit of the bucket's keys into the row's histogram. Last: its pick.
//   refine_pass  the last digit over the slices' bucket keys (when the row is not done yet). Last:
//                its pick, after which the rule is exact (the K-th key and how many of its ties).
//   tally_pass   each slice's above and tie counts. Last: their exclusive prefix in segment order.
//   emit_pass    each slice's selected entries at their positions (the prefix plus the count before
//                them in the slice), values x + n.
// Only integer counts and a fixed segment order decide positions, so the output does not depend on
// which CTA ran first.
#include <cstdint>

#include "kernel_args.cuh"

namespace logprobs::cuda_kernels {
namespace {

struct SliceShared {
  Histogram<kRowBins> hist;
  EmitShared emit;
  unsigned long long scan[kWarps];
  bool last;
};

// The segment's slice as this thread holds it (item_of(r, thread) < count).
struct SliceItems {
  float v[kRounds];
  std::uint32_t token[kRounds];
};

__device__ SliceItems load_slice(const Args& a, std::uint64_t slice, std::uint32_t count) {
  SliceItems s;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const Candidate c = slice_candidate(a, slice, item_of(r, threadIdx.x), count);
    s.v[r] = c.value;
    s.token[r] = c.token;
  }
  return s;
}

// The current digit of the current bucket's keys, added to the row's histogram of that digit.
template <typename KeyOf>
__device__ void count_digit(const Args& a, std::uint64_t local, const RadixState& st, KeyOf key_of, SliceShared& sh) {
  hist_clear(sh.hist);
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const std::uint32_t key = key_of(r);
    hist_add(sh.hist.bins, in_bucket(st, key), digit_of(st, key));
  }
  hist_flush(sh.hist, row_histogram(a.ws, a.plan, local, st.level), digit_bins(st.digits, st.level));
}

// The last CTA of the row: the digit's pick from the row's histogram, and the next state.
__device__ void pick_next(const Args& a, std::uint64_t local, const RadixState& st, SliceShared& sh) {
  hist_load(sh.hist, row_histogram(a.ws, a.plan, local, st.level), digit_bins(st.digits, st.level));
  const RadixState next = finish_histogram(st, sh.hist);
  if (threadIdx.x == 0) a.ws.select[local].state = next;
}

__global__ void __launch_bounds__(kThreads) second_pass(Args a) {
  __shared__ SliceShared sh;
  const LaunchPlan& p = a.plan;
  const std::uint64_t w = blockIdx.x;
  const std::uint64_t local = w / p.segments, segment = w % p.segments, slice = row_segment(p, local, segment);
  const RadixState st = a.ws.select[local].state;
  float x[kRounds];
  load_segment(a, a.ws.rows[local], segment, int(threadIdx.x), x);
  const auto key_of = [&](int r) { return radix_key(x[r]); };
  Candidate* items = a.ws.slices + slice * kSegment;
  const std::uint32_t kept = block_emit(key_of, kept_rule(st), 0, 0, sh.emit, [&](int r, std::uint64_t pos) {
    items[pos] = Candidate{x[r], std::uint32_t(segment * kSegment + item_of(r, threadIdx.x))};
  });
  if (threadIdx.x == 0) a.ws.slice_counts[slice] = kept >> 16;
  if (!st.done) count_digit(a, local, st, key_of, sh);
  if (arrive_last(row_counter(a.ws, p, local, 1), p.segments, sh.last) && !st.done) pick_next(a, local, st, sh);
}

__global__ void __launch_bounds__(kThreads) refine_pass(Args a) {
  __shared__ SliceShared sh;
  const LaunchPlan& p = a.plan;
  const std::uint64_t w = blockIdx.x;
  const std::uint64_t local = w / p.segments, slice = row_segment(p, local, w % p.segments);
  const RadixState st = a.ws.select[local].state;
  if (st.done) return;  // the same for every thread of the CTA
  const SliceItems s = load_slice(a, slice, a.ws.slice_counts[slice]);
  count_digit(
      a, local, st, [&](int r) { return radix_key(s.v[r]); }, sh);
  if (arrive_last(row_counter(a.ws, p, local, 2), p.segments, sh.last)) pick_next(a, local, st, sh);
}

// The exclusive prefix of the row's tallies in segment order, by the row's last CTA: 128 at a
// time, each an (above << 32 | ties) sum (ties total at most V < 2^32: no carry between halves).
__device__ void scan_tallies(const Tally* tallies, Tally* bases, std::uint64_t count, SliceShared& sh) {
  unsigned long long carry = 0;
  for (std::uint64_t begin = 0; begin < count; begin += kThreads) {
    const std::uint64_t i = begin + threadIdx.x;
    unsigned long long v = 0;
    if (i < count) v = (static_cast<unsigned long long>(__ldcg(&tallies[i].above)) << 32) | __ldcg(&tallies[i].ties);
    unsigned long long inclusive = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned long long u = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
      if (lane_id() >= d) inclusive += u;
    }
    if (lane_id() == 31) sh.scan[warp_id()] = inclusive;
    __syncthreads();
    unsigned long long before = carry + inclusive - v, chunk = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp_id()) before += sh.scan[w];
      chunk += sh.scan[w];
    }
    if (i < count) bases[i] = Tally{std::uint32_t(before >> 32), std::uint32_t(before)};
    carry += chunk;
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads) tally_pass(Args a) {
  __shared__ SliceShared sh;
  const LaunchPlan& p = a.plan;
  const std::uint64_t w = blockIdx.x;
  const std::uint64_t local = w / p.segments, slice = row_segment(p, local, w % p.segments);
  const SelectRule rule = a.ws.select[local].state.rule;  // final: refine_pass finished every row
  const SliceItems s = load_slice(a, slice, a.ws.slice_counts[slice]);
  const std::uint32_t counts =
      block_emit([&](int r) { return radix_key(s.v[r]); }, rule, 0, 0, sh.emit, [](int, std::uint64_t) {});
  if (threadIdx.x == 0) a.ws.tallies[slice] = Tally{counts >> 16, counts & 0xFFFFu};
  if (arrive_last(row_counter(a.ws, p, local, 3), p.segments, sh.last)) {
    const std::uint64_t first = row_segment(p, local, 0);
    scan_tallies(a.ws.tallies + first, a.ws.bases + first, p.segments, sh);
  }
}

__global__ void __launch_bounds__(kThreads) emit_pass(Args a) {
  __shared__ SliceShared sh;
  const LaunchPlan& p = a.plan;
  const std::uint64_t w = blockIdx.x;
  const std::uint64_t local = w / p.segments, slice = row_segment(p, local, w % p.segments);
  const std::uint32_t count = a.ws.slice_counts[slice];
  if (count == 0) return;  // the same for every thread of the CTA
  const RowSelect row = a.ws.select[local];
  const Tally base = a.ws.bases[slice];
  const SliceItems s = load_slice(a, slice, count);
  const std::uint64_t o = a.row_begin + local, width = std::uint64_t(p.k) + 1;
  float* values = a.out.lp_logits + o * width;
  std::uint32_t* tokens = a.out.lp_tokens + o * width;
  block_emit([&](int r) { return radix_key(s.v[r]); }, row.state.rule, base.above, base.ties, sh.emit,
             [&](int r, std::uint64_t pos) {
               values[pos] = canonical::output_value(s.v[r], row.normalizer);
               tokens[pos] = s.token[r];
             });
}

}  // namespace

cudaError_t launch_threshold_passes(const Args& a, cudaStream_t stream) {
  const unsigned ctas = unsigned(first_pass_ctas(a.plan, a.rows));
  second_pass<<<ctas, kThreads, 0, stream>>>(a);
  refine_pass<<<ctas, kThreads, 0, stream>>>(a);
  tally_pass<<<ctas, kThreads, 0, stream>>>(a);
  emit_pass<<<ctas, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t threshold_kernels_loadable() {
  cudaFuncAttributes attributes{};
  for (const void* kernel : {reinterpret_cast<const void*>(second_pass), reinterpret_cast<const void*>(refine_pass),
                             reinterpret_cast<const void*>(tally_pass), reinterpret_cast<const void*>(emit_pass)}) {
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace logprobs::cuda_kernels
