// A segment's arithmetic as the CUDA threads do it, in functions the kernels and the host model
// (cuda_kernel_model.hpp) both call: SPEC §2.5's x (widened exactly, divided by the temperature
// as an IEEE f32 division), each thread's max, flags and rank count, a lane's sum of the tile
// terms, and one level of the pairwise tree. Together with canonical_arithmetic.hpp's exp_f32,
// lane_tree and combine they give SPEC §8's bits: test_cuda_kernel_model.cpp holds the model,
// built from these, to the canonical and cpu backends bit for bit.
#pragma once

#include <cstdint>

#include "cuda_plan.hpp"
#include "device_batch.hpp"
#include "logprobs/canonical_arithmetic.hpp"

namespace logprobs::cuda_plan {

// Entry j of a segment is held by thread j % 128 in round j / 128: a warp's 32 loads are 32
// neighbouring entries (coalesced for any row alignment and any dtype).
LOGPROBS_HD std::uint64_t item_of(int round, int thread) {
  return std::uint64_t(round) * kThreads + std::uint64_t(thread);
}

// ---- x (SPEC §2.5) -------------------------------------------------------------------------

LOGPROBS_HD std::uint64_t dtype_bytes(DeviceDtype dtype) { return dtype == DeviceDtype::f32 ? 4 : 2; }

LOGPROBS_HD float bf16_bits_to_f32(std::uint32_t bits) { return canonical::float_of(bits << 16); }

// Exact, infinities and NaN included: integer operations, and a subnormal as mantissa * 2^-24 (an
// exact f32 product).
LOGPROBS_HD float f16_bits_to_f32(std::uint32_t bits) {
  const std::uint32_t sign = (bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;
  if (exponent == 0) return canonical::float_of(sign | canonical::bits_of(float(mantissa) * 5.9604644775390625e-8f));
  if (exponent == 0x1F) return canonical::float_of(sign | 0x7F800000u | (mantissa << 13));
  return canonical::float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The IEEE f32 quotient rounded to nearest: never a multiply by 1 / T, which rounds differently.
LOGPROBS_HD float divide_rn(float x, float t) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(x, t);
#else
  return x / t;
#endif
}

// One logit row as the kernels read it.
struct RowSource {
  const void* row;
  DeviceDtype dtype;
  bool divide;
  float temperature;
};

LOGPROBS_HD RowSource row_source(const DeviceBatch& b, std::uint64_t logit_row, bool divide, float temperature) {
  return {static_cast<const char*>(b.logits) + logit_row * b.row_stride * dtype_bytes(b.dtype), b.dtype, divide,
          temperature};
}

// Loads through the read-only path on the device: every logit is read once or twice, never written.
LOGPROBS_HD float x_at(const RowSource& s, std::uint64_t j) {
  float v;
  if (s.dtype == DeviceDtype::f32) {
#if defined(__CUDA_ARCH__)
    v = __ldg(static_cast<const float*>(s.row) + j);
#else
    v = static_cast<const float*>(s.row)[j];
#endif
  } else {
#if defined(__CUDA_ARCH__)
    const std::uint32_t bits = __ldg(static_cast<const unsigned short*>(s.row) + j);
#else
    const std::uint32_t bits = static_cast<const std::uint16_t*>(s.row)[j];
#endif
    v = s.dtype == DeviceDtype::bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  }
  return s.divide ? divide_rn(v, s.temperature) : v;
}

// ---- A thread's share of a segment -------------------------------------------------------------

struct ThreadStats {
  float max;  // over its entries that are not NaN (canonical::segment_partial's rule)
  std::uint32_t flags;
  std::uint32_t at_least_xs;
};

LOGPROBS_HD ThreadStats thread_stats_begin() { return {negative_infinity(), 0u, 0u}; }

// Entries past the row's end (valid false) count nowhere: not in the max, the flags or the rank
// (an -inf there would count as >= an x_s of -inf).
LOGPROBS_HD void thread_stats_add(ThreadStats& s, float x, bool valid, float xs) {
  if (!valid) return;
  s.flags |= canonical::flags_of(x);
  if (x > s.max) s.max = x;            // false for NaN
  s.at_least_xs += x >= xs ? 1u : 0u;  // false for NaN, and for every x when x_s is NaN
}

// Two thread maxima combined, the first kept on a tie: ties differ only in the sign of zero,
// which changes no output bit (exp_f32(+0) = exp_f32(-0) = 1, and n takes the max only through
// comparisons, differences and a sum with log S).
LOGPROBS_HD float max_of(float a, float b) { return b > a ? b : a; }

// A segment entry's term: exp(x - m) for the entries the segment holds, 0 past the row's end.
LOGPROBS_HD float exp_term(float x, float m, bool valid) { return valid ? canonical::exp_f32(x - m) : 0.0f; }

// Lane l's sum over the segment's 16 tiles, as canonical::segment_partial defines it: per tile
// (E0 + E1) + (E2 + E3), added tile after tile from +0. `e` holds the segment's 1024 terms, 0 past
// the row's end; a tile wholly past it adds +0 to a sum >= +0, which changes no bit, so every
// segment runs all 16 tiles.
LOGPROBS_HD float lane_sum(const float* e, int lane) {
  float s = 0.0f;
  for (int tile = 0; tile < canonical::kTilesPerSegment; ++tile) {
    const float* p = e + tile * canonical::kTile + lane;
    s = s + ((p[0] + p[canonical::kLanes]) + (p[2 * canonical::kLanes] + p[3 * canonical::kLanes]));
  }
  return s;
}

// Loads of what other CTAs of the same kernel wrote: from L2 on the device (__ldcg), never from
// a stale L1 line.
template <typename T>
LOGPROBS_HD T load_cg(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *p;
#endif
}

// ---- A group's rows --------------------------------------------------------------------------

// Output row `local` of the group: its logit row, evaluated token, temperature and x_s (the
// prepare kernel's work, once per row).
LOGPROBS_HD RowInfo row_info_of(const GroupArgs& a, std::uint64_t local) {
  const DeviceBatch& b = a.batch;
  const DeviceRowTask task = map_output_row(a.row_begin + local, b.batch_size, b.lp_output_offsets, b.logit_row_offsets,
                                            b.token_row_offsets, b.tokens, b.sampled_tokens);
  const bool divide = b.temperatures != nullptr;
  const float t = divide ? b.temperatures[task.batch_item] : 1.0f;
  return {task.logit_row, task.token, divide ? 1u : 0u, t, x_at(row_source(b, task.logit_row, divide, t), task.token)};
}

// Segment `segment` of the row of `info` as `thread` holds it: x[r] = entry item_of(r, thread),
// -inf past the row's end. Returns how many entries the segment has.
LOGPROBS_HD std::uint64_t load_segment(const GroupArgs& a, const RowInfo& info, std::uint64_t segment, int thread,
                                       float (&x)[kRounds]) {
  const RowSource src = row_source(a.batch, info.logit_row, info.divide != 0, info.temperature);
  const std::uint64_t begin = segment * kSegment;
  const std::uint64_t n = a.batch.vocab - begin < kSegment ? a.batch.vocab - begin : kSegment;
  for (int r = 0; r < kRounds; ++r) {
    const std::uint64_t j = item_of(r, thread);
    x[r] = j < n ? x_at(src, begin + j) : negative_infinity();
  }
  return n;
}

struct RowStats {
  double normalizer;
  std::uint32_t rank;
};

// A root's part of its output row besides the top slots: padding (V, -inf + n) after the
// `selected` top slots (NaN when n is, SPEC §3), shared by `threads` threads; then, by thread 0,
// the evaluated token's slot and the rank.
LOGPROBS_HD void write_row_tail(const GroupArgs& a, std::uint64_t local, const RowStats& row, std::uint32_t selected,
                                int thread, int threads) {
  const RowInfo info = a.ws.rows[local];
  const std::uint64_t o = a.row_begin + local, width = std::uint64_t(a.plan.k) + 1;
  float* values = a.out.lp_logits + o * width;
  std::uint32_t* tokens = a.out.lp_tokens + o * width;
  const float padding = canonical::output_value(negative_infinity(), row.normalizer);
  for (std::uint64_t slot = selected + std::uint64_t(thread); slot < a.plan.k; slot += std::uint64_t(threads)) {
    values[slot] = padding;
    tokens[slot] = std::uint32_t(a.batch.vocab);
  }
  if (thread == 0) {
    values[a.plan.k] = canonical::output_value(info.xs, row.normalizer);
    tokens[a.plan.k] = info.token;
    if (a.out.lp_ranks != nullptr) a.out.lp_ranks[o] = row.rank;
  }
}

// Item i of node `node`'s merge (level >= 1): a child's list slot, or an empty item (-inf, key 0).
LOGPROBS_HD Candidate merge_candidate(const GroupArgs& a, std::uint64_t local, int level, std::uint64_t node,
                                      std::uint64_t i) {
  const LaunchPlan& p = a.plan;
  const MergeItem m = merge_item(p.tree, node, p.k, i);
  if (i / p.k >= children_of(p.tree, level, node) || m.slot >= load_cg(node_count(a.ws, p, local, level - 1, m.child)))
    return {negative_infinity(), 0u};
  const Candidate* c = node_list(a.ws, p, local, level - 1, m.child) + m.slot;
  return {load_cg(&c->value), load_cg(&c->token)};
}

// Item i of a threshold-path slice of `count` items, or an empty item.
LOGPROBS_HD Candidate slice_candidate(const GroupArgs& a, std::uint64_t slice, std::uint64_t i, std::uint32_t count) {
  if (i >= count) return {negative_infinity(), 0u};
  return a.ws.slices[slice * kSegment + i];
}

// ---- The row's pairwise tree ---------------------------------------------------------------------

// Node i of the next level of canonical::pairwise_tree over the parts part(0 .. count - 1): parts
// 2i and 2i + 1 combined, or an unpaired last one moved up. A level of these, computed in
// parallel, is the header's in-place loop: that loop never reads a part it has already overwritten.
template <typename Part>
LOGPROBS_HD canonical::Partial tree_node(Part part, std::uint64_t count, std::uint64_t i) {
  return 2 * i + 1 < count ? canonical::combine(part(2 * i), part(2 * i + 1)) : part(2 * i);
}

LOGPROBS_HD canonical::Partial partial_of(const SegStats& s) {
  canonical::Partial p;
  p.max = s.max;
  p.sum = s.sum;
  return p;
}

}  // namespace logprobs::cuda_plan
