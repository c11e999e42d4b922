// The pure logic of the CUDA backend, shared by the kernels (nvcc) and the CPU tests (g++):
// the row split fixed by V, the combine of partial (max, sum-exp) pairs, the candidate rule and
// radix keys, the radix-select state machine, emit positions, the output-row mapping and the
// launch plan. Nothing here touches the CUDA runtime, so test_cuda_plan.cpp and
// test_cuda_kernel_model.cpp check every rule the kernels apply without a GPU.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LOGPROBS_HD __host__ __device__ __forceinline__
#else
#define LOGPROBS_HD inline
#endif

namespace logprobs::cuda_plan {

// One CTA: 512 threads, each holding 16 logits as four 16-byte quads. A chunk is what one CTA
// reads of a row in the first pass; its size is a constant, so the split of a row depends on V
// alone and every reduction tree is fixed by V (SPEC §6: deterministic and batch-invariant).
inline constexpr int kThreads = 512;
inline constexpr int kQuadsPerThread = 4;
inline constexpr int kItemsPerThread = 4 * kQuadsPerThread;
inline constexpr std::uint64_t kChunkElems = std::uint64_t(kThreads) * kItemsPerThread;  // 8192
inline constexpr int kRadixBins = 256;
inline constexpr int kWarpSize = 32;
inline constexpr int kBinsPerLane = kRadixBins / kWarpSize;  // 8

// ---- The split of a row: fixed by V alone --------------------------------------------------

LOGPROBS_HD std::uint64_t splits_for_vocab(std::uint64_t vocab) { return (vocab + kChunkElems - 1) / kChunkElems; }

// The element index of quad q of thread t in a chunk (coalesced: neighbouring threads read
// neighbouring 16-byte quads). The layout is the same on the vector and the scalar load path,
// so a row's reduction order never depends on its alignment.
LOGPROBS_HD std::uint64_t quad_offset(int quad, int thread) {
  return 4 * (std::uint64_t(quad) * kThreads + std::uint64_t(thread));
}

// ---- Partial log-sum-exp statistics ----------------------------------------------------------

inline constexpr std::uint32_t kHasNaN = 1;
inline constexpr std::uint32_t kHasPosInf = 2;

// (max, sum of exp(x - max)) over the finite and -inf entries seen; NaN and +inf only set a flag
// (they make the normalizer NaN, SPEC §3, so they must not poison max or sum on the way).
// An empty or all -inf part is (-inf, 0).
struct PartialStats {
  float max;
  float sum;
  std::uint32_t flags;
};

LOGPROBS_HD float negative_infinity() {
  std::uint32_t bits = 0xFF800000u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

LOGPROBS_HD bool is_finite_value(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x7F800000u) != 0x7F800000u;
}

LOGPROBS_HD PartialStats empty_stats() { return {negative_infinity(), 0.0f, 0u}; }

// The flags an entry sets; the entries that count in max and sum are the ones with none set
// (finite or -inf).
LOGPROBS_HD std::uint32_t special_flags(float x) {
  if (x != x) return kHasNaN;
  if (x > 0.0f && !is_finite_value(x)) return kHasPosInf;
  return 0u;
}

// The combine of two partials. Commutative and exact in the max; the sum is rescaled to the new
// max. Both -inf: (-inf, 0), never exp(-inf - -inf) = NaN.
template <typename ExpF>
LOGPROBS_HD PartialStats combine_stats(const PartialStats& a, const PartialStats& b, ExpF exp_fn) {
  const float m = a.max > b.max ? a.max : b.max;
  PartialStats out{m, 0.0f, a.flags | b.flags};
  if (!(m > negative_infinity())) return out;  // nothing finite on either side
  const float sa = a.max > negative_infinity() ? a.sum * exp_fn(a.max - m) : 0.0f;
  const float sb = b.max > negative_infinity() ? b.sum * exp_fn(b.max - m) : 0.0f;
  out.sum = sa + sb;
  return out;
}

// n = -(m + log S), NaN for the rows SPEC §3 lists: a NaN or +inf anywhere, or only -inf.
template <typename LogF>
LOGPROBS_HD float normalizer(const PartialStats& s, LogF log_fn) {
  if (s.flags != 0u || !(s.max > negative_infinity())) {
    std::uint32_t bits = 0x7FC00000u;
    float nan;
    std::memcpy(&nan, &bits, sizeof nan);
    return nan;
  }
  return -(s.max + log_fn(s.sum));
}

// ---- Candidates and radix keys -----------------------------------------------------------

// Order-preserving map of f32 to u32 (larger float, larger key), with 0 reserved for entries
// that are never candidates (SPEC §2.6: NaN and -inf). The usual flip (negative: invert all
// bits; positive: set the sign bit) sends -inf to 0x007FFFFF and every NaN either above
// +inf's 0xFF800000 or below -inf's; those and -inf itself become 0, so every candidate key is
// at least 0x00800000 (-FLT_MAX) and at most 0xFF800000 (+inf).
LOGPROBS_HD std::uint32_t radix_key(float x) {
  if (x != x || !(x > negative_infinity())) return 0u;
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

LOGPROBS_HD float value_of_key(std::uint32_t key) {
  const std::uint32_t bits = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

LOGPROBS_HD bool is_candidate_key(std::uint32_t key) { return key != 0u; }

// ---- Radix select: the K largest keys, most significant byte first ------------------------

// Which keys are selected when the select ends: every key above gt_bound, plus the first `ties`
// keys equal to tie_key in a fixed item order. Key 0 (not a candidate) is never above gt_bound.
struct SelectRule {
  std::uint32_t gt_bound;
  std::uint32_t tie_key;
  std::uint32_t ties;
  std::uint32_t selected;  // how many keys the rule selects: min(K, candidates)
};

struct RadixState {
  std::uint32_t prefix;     // digits chosen so far
  std::uint32_t mask;       // which bits of the prefix are chosen
  std::uint32_t remaining;  // keys still to select inside the current bucket
  int shift;                // the digit the next pass histograms
  std::uint32_t k;
  bool done;
  SelectRule rule;
};

LOGPROBS_HD RadixState radix_begin(std::uint32_t k) {
  return {0u, 0u, k, 24, k, k == 0u, {0xFFFFFFFFu, 0u, 0u, 0u}};
}

// Whether a key is in the current pass's histogram.
LOGPROBS_HD bool in_bucket(const RadixState& s, std::uint32_t key) {
  return is_candidate_key(key) && (key & s.mask) == s.prefix;
}

LOGPROBS_HD int digit_of(const RadixState& s, std::uint32_t key) { return int((key >> s.shift) & 0xFFu); }

// The bucket holding the remaining-th largest key: digit, the count in buckets above it, and the
// count in it. `above_before` counts keys in bins above top_bin.
struct DigitPick {
  int digit;
  std::uint32_t above;
  std::uint32_t bucket;
};

// Walks bins top_bin, top_bin-1, ... (count of them); the bucket is the first where the running
// count reaches `remaining`. One warp lane runs this over its 8 bins on the GPU; the CPU oracle
// runs it over all 256. Returns digit -1 when the bins hold fewer than `remaining` keys.
LOGPROBS_HD DigitPick pick_digit_in_group(const std::uint32_t* hist, int top_bin, int count,
                                         std::uint32_t above_before, std::uint32_t remaining) {
  std::uint32_t above = above_before;
  for (int i = 0; i < count; ++i) {
    const int bin = top_bin - i;
    if (above + hist[bin] >= remaining) return {bin, above, hist[bin]};
    above += hist[bin];
  }
  return {-1, above, 0u};
}

LOGPROBS_HD DigitPick pick_digit(const std::uint32_t* hist, std::uint32_t remaining) {
  return pick_digit_in_group(hist, kRadixBins - 1, kRadixBins, 0u, remaining);
}

// The lane of a warp that owns bins [top - 7, top], top = 255 - 8 * lane (lane 0: the highest).
LOGPROBS_HD int lane_top_bin(int lane) { return kRadixBins - 1 - kBinsPerLane * lane; }

// One pass done: `total` keys were in the histogram (the current bucket), and `pick` was chosen
// from it when total > remaining. Returns the next state; once done, state.rule is final.
LOGPROBS_HD RadixState radix_step(RadixState s, std::uint32_t total, const DigitPick& pick) {
  if (s.done) return s;
  if (total <= s.remaining) {
    // Only on the first pass (later passes histogram a bucket holding more than `remaining`):
    // there are no more candidates than K, so all of them are selected.
    s.done = true;
    s.rule = {0u, 0u, 0u, total};
    return s;
  }
  s.prefix |= std::uint32_t(pick.digit) << s.shift;
  s.mask |= 0xFFu << s.shift;
  s.remaining -= pick.above;
  if (pick.bucket == s.remaining) {
    // The whole bucket is selected: exactly the keys >= prefix. prefix >= 1 here, because a
    // bucket at prefix 0 that completes K would hold every candidate, and there are more than K.
    s.done = true;
    s.rule = {s.prefix - 1u, 0u, 0u, s.k};
    return s;
  }
  if (s.shift == 0) {
    // Every bit chosen: the bucket is one key value; take `remaining` of its copies.
    s.done = true;
    s.rule = {s.prefix, s.prefix, s.remaining, s.k};
    return s;
  }
  s.shift -= 8;
  return s;
}

LOGPROBS_HD bool is_above(const SelectRule& r, std::uint32_t key) { return key > r.gt_bound; }
LOGPROBS_HD bool is_tie(const SelectRule& r, std::uint32_t key) {
  return r.ties != 0u && key == r.tie_key && is_candidate_key(key);
}

// The threshold filter. If tau is the K-th largest of the per-thread maxima, at least K items
// are >= tau, so the K-th largest item is >= tau too and no item below tau can be selected:
// the select may treat them as non-candidates and histogram far fewer keys. candidate_floor
// reads a lower bound of the K-th largest selected key off a finished rule: the tie key when it
// took ties, else one above the bound (1 when all candidates were selected: no filter).
LOGPROBS_HD std::uint32_t candidate_floor(const SelectRule& r) { return r.ties != 0u ? r.tie_key : r.gt_bound + 1u; }
LOGPROBS_HD std::uint32_t filter_key(std::uint32_t key, std::uint32_t floor) { return key >= floor ? key : 0u; }

// Counts of (above, tie) keys packed in one 64-bit word, so that one block-wide exclusive sum
// gives both prefixes (each count is below 2^32, so the halves never carry into each other).
LOGPROBS_HD std::uint64_t pack_counts(std::uint32_t above, std::uint32_t ties) {
  return (std::uint64_t(above) << 32) | ties;
}
LOGPROBS_HD std::uint32_t above_count(std::uint64_t packed) { return std::uint32_t(packed >> 32); }
LOGPROBS_HD std::uint32_t tie_count(std::uint64_t packed) { return std::uint32_t(packed); }

// The output position of a key given the selected-order counts before it, or -1 when not selected.
// Selected keys fill positions 0 .. rule.selected - 1, in item order: a key above the bound
// follows every above key and every taken tie before it.
LOGPROBS_HD std::int64_t emit_position(const SelectRule& r, std::uint32_t key, std::uint64_t above_before,
                                       std::uint64_t ties_before) {
  if (is_above(r, key)) return std::int64_t(above_before + (ties_before < r.ties ? ties_before : r.ties));
  if (is_tie(r, key) && ties_before < r.ties) return std::int64_t(above_before + ties_before);
  return -1;
}

// ---- SPEC §2 steps 1-4 on the device ------------------------------------------------------

struct DeviceRowTask {
  std::uint64_t logit_row;
  std::uint32_t token;
};

// Output row o of a validated batch: b is the last batch with loo[b] <= o (empty batches share
// their offset with the next one, so the last is the one that owns o).
LOGPROBS_HD DeviceRowTask map_output_row(std::uint64_t o, std::uint64_t batch_size, const std::uint32_t* loo,
                                         const std::uint32_t* lro, const std::uint32_t* tro,
                                         const std::uint32_t* tokens, const std::uint32_t* sampled) {
  std::uint64_t lo = 0, hi = batch_size;  // invariant: loo[lo] <= o < loo[hi]
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (loo[mid] <= o) lo = mid; else hi = mid;
  }
  const std::uint64_t b = lo;
  const std::uint64_t r = std::uint64_t(loo[b + 1]) - o - 1;
  const std::uint32_t token = r == 0 ? sampled[b] : tokens[std::uint64_t(tro[b + 1]) - r];
  return {std::uint64_t(lro[b + 1]) - r - 1, token};
}

// ---- The launch plan ------------------------------------------------------------------------

// Two kernels per group of output rows. Pass 1: one CTA per (row, chunk) computes the chunk's
// partial stats and, on the register path, its own top-K. Pass 2: one CTA per row combines the
// partials in chunk order and selects the row's top-K, either from the chunks' candidates held
// in registers (splits * K fits one CTA's items) or by a radix select streamed over the row again
// (large K or huge V). Both choices depend on V and levels alone.
struct Candidate {
  float value;
  std::uint32_t token;
};

struct ChunkStats {
  PartialStats stats;
  std::uint32_t kept;  // candidates this chunk wrote (register path)
};

struct LaunchPlan {
  std::uint64_t splits;          // chunks per row
  std::uint32_t k;               // top slots
  bool register_merge;           // pass 2 selects from the chunks' candidates, else streams the row
  std::uint64_t rows_per_group;  // output rows per pair of launches, bounded by the workspace
  std::uint64_t groups;
  std::uint64_t stats_bytes_per_row;
  std::uint64_t candidate_bytes_per_row;
  std::uint64_t workspace_bytes;  // for one group; the launches reuse it group after group
};

inline constexpr std::uint64_t kMergeCapacity = std::uint64_t(kThreads) * kItemsPerThread;
inline constexpr std::uint64_t kDefaultWorkspaceBudget = std::uint64_t(64) << 20;

LOGPROBS_HD std::uint64_t round_up_256(std::uint64_t bytes) { return (bytes + 255) / 256 * 256; }

LOGPROBS_HD LaunchPlan plan_launch(std::uint64_t output_rows, std::uint64_t vocab, int levels,
                                   std::uint64_t workspace_budget = kDefaultWorkspaceBudget) {
  LaunchPlan p{};
  p.splits = splits_for_vocab(vocab);
  p.k = levels <= 0 ? 0u : (1u << levels) - 1u;
  p.register_merge = p.splits * p.k <= kMergeCapacity;
  p.stats_bytes_per_row = p.splits * sizeof(ChunkStats);
  p.candidate_bytes_per_row = p.register_merge ? p.splits * p.k * sizeof(Candidate) : 0;
  const std::uint64_t per_row = p.stats_bytes_per_row + p.candidate_bytes_per_row;
  std::uint64_t rows = per_row == 0 ? output_rows : workspace_budget / per_row;
  if (rows < 1) rows = 1;
  if (rows > output_rows) rows = output_rows;
  p.rows_per_group = rows;
  p.groups = rows == 0 ? 0 : (output_rows + rows - 1) / rows;
  p.workspace_bytes = round_up_256(rows * p.stats_bytes_per_row) + round_up_256(rows * p.candidate_bytes_per_row);
  return p;
}

// The items one pass-2 CTA holds on the register path: chunk c's candidate j is item
// c * K + j, held by thread item % kThreads as its item / kThreads.
LOGPROBS_HD int merge_items_per_thread(const LaunchPlan& p) {
  return int((p.splits * p.k + kThreads - 1) / kThreads);
}

// CTAs to launch for `work` independent CTA-sized items: a grid-stride loop covers the rest, so
// the count never overflows gridDim.x and never changes what any item computes.
LOGPROBS_HD std::uint32_t grid_size(std::uint64_t work, std::uint32_t max_ctas) {
  return std::uint32_t(work < max_ctas ? work : max_ctas);
}

}  // namespace logprobs::cuda_plan
