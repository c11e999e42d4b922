// The CUDA backend's launch plan as pure functions, shared by the kernels (nvcc), the host model
// (cuda_kernel_model.hpp) and the plan's tests: which path a (V, K) takes, the merge tree over a
// row's segments, the workspace layout, the SPEC §2 row mapping, and what each path costs (CTAs,
// reads of a row, items through one CTA), so that test_cuda_plan.cpp checks on the host that the
// GPU is kept full.
//
// The unit of work is SPEC §8's segment of 1024 entries: one CTA of 128 threads, 8 entries a
// thread (entry 128 r + t of the segment for thread t, round r). Every row is cut the same way,
// so decode (1 x 128256) spreads over 126 CTAs, and a row's bits never depend on the grid.
// Three paths, all giving the same bits (the selection is a total order, the statistics the
// canonical tree):
//   stats_only (K = 0)  one pass; the last CTA of a row to finish reduces the segments' partials.
//   merge_tree          each segment selects its own top-K; nodes of F = 1024 / K children merge
//                       their children's lists, in the CTA of the last child to finish (an atomic
//                       counter per node), up to the root, which writes the row. One read of the row.
//   threshold           large K: pass 1 also counts the candidates' top 11 key bits into a row
//                       histogram; pass 2 reads the row again and compacts the entries at or above
//                       the threshold bucket (and counts the next 11 bits), then small passes over
//                       the compacted entries find the exact threshold, tally each segment's
//                       selected entries, and write them. Two reads of the row.
#pragma once

#include <cstdint>

#include "cuda_select.hpp"
#include "device_batch.hpp"
#include "logprobs/canonical_arithmetic.hpp"

namespace logprobs::cuda_plan {

// SPEC §1's largest K (logprobs::kMaxK, which this C++17 header cannot include; the tests hold them
// equal).
inline constexpr std::uint32_t kMaxK = 65535;
inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kRounds = 8;  // entries a thread holds
inline constexpr std::uint64_t kSegment = canonical::kSegment;
inline constexpr std::uint64_t kCtaItems = std::uint64_t(kThreads) * kRounds;  // what one CTA selects from
static_assert(kCtaItems == kSegment, "one CTA holds one segment");
static_assert(kRounds * kWarps == 32, "one warp scans a CTA's per-(round, warp) counts");
inline constexpr int kMaxMergeDepth = 4;      // deeper trees take the threshold path
inline constexpr int kMaxTreeLevels = 24;     // V < 2^32: at most 2^22 segments, fan-in >= 2
inline constexpr int kRowBins = 2048;         // the widest row-level digit (cuda_select.hpp)
inline constexpr int kThresholdCounters = 4;  // pass 1's root, pass 2, refine, tally

enum class Path : std::uint8_t { stats_only, merge_tree, threshold };

// ---- The merge tree over a row's segments -----------------------------------------------------

// Level 0 holds the segments; node k of level l + 1 has children [k F, k F + F) of level l (the
// last node fewer). A row's nodes are numbered level by level: node k of level l is
// first[l] + k. stats_only and threshold use the one-level tree (fan-in = segments).
struct Tree {
  std::uint64_t fan_in;
  int depth;  // levels above the segments; 0: the one segment is the root
  std::uint64_t nodes[kMaxTreeLevels + 1];
  std::uint64_t first[kMaxTreeLevels + 1];
};

LOGPROBS_HD Tree make_tree(std::uint64_t segments, std::uint64_t fan_in) {
  Tree t{};
  t.fan_in = fan_in;
  t.nodes[0] = segments;
  while (t.nodes[t.depth] > 1 && t.depth < kMaxTreeLevels) {
    t.nodes[t.depth + 1] = (t.nodes[t.depth] + fan_in - 1) / fan_in;
    t.first[t.depth + 1] = t.first[t.depth] + t.nodes[t.depth];
    ++t.depth;
  }
  return t;
}

LOGPROBS_HD std::uint64_t children_of(const Tree& t, int level, std::uint64_t node) {
  const std::uint64_t begin = node * t.fan_in, below = t.nodes[level - 1];
  return below - begin < t.fan_in ? below - begin : t.fan_in;
}
// Nodes that hold a list (all but the root) and nodes that count their children (all but the
// segments).
LOGPROBS_HD std::uint64_t list_nodes(const Tree& t) { return t.first[t.depth]; }
LOGPROBS_HD std::uint64_t counted_nodes(const Tree& t) { return t.first[t.depth] + 1 - t.nodes[0]; }

// Item i of a merge (i < F K) is slot i % K of child i / K: children's lists side by side in child
// order, which is token order, each list in token order.
struct MergeItem {
  std::uint64_t child;  // index in the level below
  std::uint32_t slot;
};
LOGPROBS_HD MergeItem merge_item(const Tree& t, std::uint64_t node, std::uint32_t k, std::uint64_t i) {
  return {node * t.fan_in + i / k, std::uint32_t(i % k)};
}

// Whether `path` can compute (V, K): a merge holds F K <= 1024 items, F >= 2.
LOGPROBS_HD bool path_valid(std::uint64_t vocab, std::uint32_t k, Path path) {
  if (path == Path::stats_only) return k == 0;
  if (k == 0) return false;
  return path == Path::threshold || canonical::segment_count(vocab) == 1 || k <= kCtaItems / 2;
}

LOGPROBS_HD Path choose_path(std::uint64_t vocab, std::uint32_t k) {
  if (k == 0) return Path::stats_only;
  const std::uint64_t segments = canonical::segment_count(vocab);
  if (segments == 1) return Path::merge_tree;  // one CTA holds the row: any K
  if (k > kCtaItems / 2) return Path::threshold;
  return make_tree(segments, kCtaItems / k).depth <= kMaxMergeDepth ? Path::merge_tree : Path::threshold;
}

// ---- Workspace records ------------------------------------------------------------------------

struct RowInfo {  // written once per output row by the prepare kernel
  std::uint64_t logit_row;
  std::uint32_t token;
  std::uint32_t divide;  // a temperature applies (SPEC §2.5)
  float temperature;
  float xs;  // x of the evaluated token, after widening and the temperature
};
struct SegStats {
  float max, sum;  // the segment's canonical::Partial
  std::uint32_t flags;
  std::uint32_t at_least_xs;  // entries with x >= x_s (SPEC §2.9)
};
struct Candidate {
  float value;
  std::uint32_t token;
};
struct RowSelect {  // the threshold path's row state, from pass 1 on
  double normalizer;
  RadixState state;
};
struct Tally {  // a segment's selected entries (threshold path), then the prefix before it
  std::uint32_t above;
  std::uint32_t ties;
};

// ---- The plan --------------------------------------------------------------------------------

inline constexpr std::uint64_t kDefaultWorkspaceBudget = std::uint64_t(64) << 20;

struct LaunchPlan {
  std::uint64_t vocab;
  std::uint64_t segments;
  std::uint32_t k;
  Path path;
  Tree tree;
  std::uint64_t counters_per_row;
  std::uint64_t zeroed_words_per_row;  // counters, then the threshold path's three histograms
  std::uint64_t rows_per_group;        // output rows per round of launches, bounded by the workspace
  std::uint64_t groups;
  std::uint64_t workspace_bytes;  // for one group; the launches reuse it group after group
};

// Byte offsets of the regions of a group's workspace (each 256-byte aligned, per-row arrays
// row-major).
struct Layout {
  std::uint64_t rows, seg, zeroed, scratch, lists, list_counts, select, slice_counts, tallies, bases, slices, total;
};

LOGPROBS_HD std::uint64_t round_up_256(std::uint64_t bytes) { return (bytes + 255) / 256 * 256; }

// Above this many segments the root reduces the first levels of the tree in global scratch.
inline constexpr std::uint64_t kSharedTreeParts = 256;

LOGPROBS_HD Layout layout_for(const LaunchPlan& p, std::uint64_t rows) {
  const std::uint64_t s = p.segments;
  const bool threshold = p.path == Path::threshold;
  const bool lists = p.path == Path::merge_tree;
  const std::uint64_t sizes[] = {
      rows * sizeof(RowInfo),
      rows * s * sizeof(SegStats),
      rows * p.zeroed_words_per_row * 4,
      s > kSharedTreeParts ? rows * s * sizeof(canonical::Partial) : 0,
      lists ? rows * list_nodes(p.tree) * p.k * sizeof(Candidate) : 0,
      lists ? rows * list_nodes(p.tree) * 4 : 0,
      threshold ? rows * sizeof(RowSelect) : 0,
      threshold ? rows * s * 4 : 0,
      threshold ? rows * s * sizeof(Tally) : 0,
      threshold ? rows * s * sizeof(Tally) : 0,
      threshold ? rows * s * kSegment * sizeof(Candidate) : 0,
  };
  std::uint64_t at[12];
  at[0] = 0;
  for (int i = 0; i < 11; ++i) at[i + 1] = at[i] + round_up_256(sizes[i]);
  return {at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8], at[9], at[10], at[11]};
}

// `path` forces a path (the tests run every valid one on the same rows); path_valid must hold.
LOGPROBS_HD LaunchPlan plan_launch_with(std::uint64_t output_rows, std::uint64_t vocab, std::uint32_t k, Path path,
                                        std::uint64_t workspace_budget = kDefaultWorkspaceBudget) {
  LaunchPlan p{};
  p.vocab = vocab;
  p.segments = canonical::segment_count(vocab);
  p.k = k;
  p.path = path;
  p.tree = make_tree(p.segments, path == Path::merge_tree && p.segments > 1 ? kCtaItems / k : p.segments);
  const std::uint64_t counted = counted_nodes(p.tree);
  p.counters_per_row = path == Path::threshold ? kThresholdCounters : (counted > 0 ? counted : 1);  // stats_only: one
  p.zeroed_words_per_row = (p.counters_per_row + 31) / 32 * 32 + (path == Path::threshold ? 3 * kRowBins : 0);
  const std::uint64_t per_row = layout_for(p, 1).total;
  std::uint64_t rows = workspace_budget / per_row;
  if (rows < 1) rows = 1;
  if (rows > output_rows) rows = output_rows;
  p.rows_per_group = rows;
  p.groups = rows == 0 ? 0 : (output_rows + rows - 1) / rows;
  p.workspace_bytes = rows == 0 ? 0 : layout_for(p, rows).total;
  return p;
}

LOGPROBS_HD LaunchPlan plan_launch(std::uint64_t output_rows, std::uint64_t vocab, std::uint32_t k,
                                   std::uint64_t workspace_budget = kDefaultWorkspaceBudget) {
  return plan_launch_with(output_rows, vocab, k, choose_path(vocab, k), workspace_budget);
}

// The regions of a group's workspace as typed pointers (device memory for the kernels, host
// memory for the model), and each row's part of them.
struct Workspace {
  RowInfo* rows;
  SegStats* seg;                // [row][segment]
  std::uint32_t* zeroed;        // [row][zeroed_words_per_row]: counters, then histograms
  canonical::Partial* scratch;  // [row][segment]: the root's tree levels above kSharedTreeParts
  Candidate* lists;             // [row][list node][K]
  std::uint32_t* list_counts;   // [row][list node]
  RowSelect* select;            // [row]
  std::uint32_t* slice_counts;  // [row][segment]: entries pass 2 kept
  Tally* tallies;               // [row][segment]
  Tally* bases;                 // [row][segment]
  Candidate* slices;            // [row][segment][1024]
};

LOGPROBS_HD Workspace workspace_at(void* base, const Layout& l) {
  char* b = static_cast<char*>(base);
  return {reinterpret_cast<RowInfo*>(b + l.rows),         reinterpret_cast<SegStats*>(b + l.seg),
          reinterpret_cast<std::uint32_t*>(b + l.zeroed), reinterpret_cast<canonical::Partial*>(b + l.scratch),
          reinterpret_cast<Candidate*>(b + l.lists),      reinterpret_cast<std::uint32_t*>(b + l.list_counts),
          reinterpret_cast<RowSelect*>(b + l.select),     reinterpret_cast<std::uint32_t*>(b + l.slice_counts),
          reinterpret_cast<Tally*>(b + l.tallies),        reinterpret_cast<Tally*>(b + l.bases),
          reinterpret_cast<Candidate*>(b + l.slices)};
}

// Counter i of a row: a merge-tree node (node k of level l >= 1 is first[l] + k - segments), or the
// threshold path's passes (0 pass 1, 1 pass 2, 2 refine, 3 tally); stats_only has one.
LOGPROBS_HD std::uint32_t* row_counter(const Workspace& w, const LaunchPlan& p, std::uint64_t row, std::uint64_t i) {
  return w.zeroed + row * p.zeroed_words_per_row + i;
}
LOGPROBS_HD std::uint32_t* node_counter(const Workspace& w, const LaunchPlan& p, std::uint64_t row, int level,
                                        std::uint64_t node) {
  return row_counter(w, p, row, p.tree.first[level] + node - p.segments);
}
// The threshold path's histogram of digit `level` (kRowBins words).
LOGPROBS_HD std::uint32_t* row_histogram(const Workspace& w, const LaunchPlan& p, std::uint64_t row, int level) {
  return row_counter(w, p, row, (p.counters_per_row + 31) / 32 * 32 + std::uint64_t(level) * kRowBins);
}
LOGPROBS_HD Candidate* node_list(const Workspace& w, const LaunchPlan& p, std::uint64_t row, int level,
                                 std::uint64_t node) {
  return w.lists + (row * list_nodes(p.tree) + p.tree.first[level] + node) * p.k;
}
LOGPROBS_HD std::uint32_t* node_count(const Workspace& w, const LaunchPlan& p, std::uint64_t row, int level,
                                      std::uint64_t node) {
  return w.list_counts + row * list_nodes(p.tree) + p.tree.first[level] + node;
}
LOGPROBS_HD std::uint64_t row_segment(const LaunchPlan& p, std::uint64_t row, std::uint64_t segment) {
  return row * p.segments + segment;
}

// What every kernel is given for one group of output rows (and the host model, on host memory).
struct GroupArgs {
  DeviceBatch batch;
  DeviceOutput out;
  LaunchPlan plan;
  Workspace ws;
  std::uint64_t row_begin;  // the group's first output row
  std::uint64_t rows;       // output rows in the group
};

// ---- What a plan costs (test_cuda_plan.cpp holds these to the targets) ---------------

// CTAs of the first pass for a group of `rows` rows: one per (row, segment).
LOGPROBS_HD std::uint64_t first_pass_ctas(const LaunchPlan& p, std::uint64_t rows) { return rows * p.segments; }
// Times each logit of a row is read from memory (plus the evaluated token's once, in prepare).
LOGPROBS_HD int row_reads(const LaunchPlan& p) { return p.path == Path::threshold ? 2 : 1; }
LOGPROBS_HD std::uint64_t logit_bytes_read_per_row(const LaunchPlan& p, std::uint64_t dtype_bytes) {
  return (std::uint64_t(row_reads(p)) * p.vocab + 1) * dtype_bytes;
}
// Kernels launched per group: prepare and pass 1 (which fuses the merge), plus the threshold
// path's pass 2, refine, tally and emit.
LOGPROBS_HD int kernels_per_group(const LaunchPlan& p) { return p.path == Path::threshold ? 6 : 2; }
// The most of a row's data any one CTA works through: a segment or a merge (<= 1024 entries or
// list slots), or a root's tree and the threshold path's prefix over the row's segments (one
// partial or tally each); besides those, only histograms of a fixed 2048 bins. Never the row,
// once the row has more than one segment.
LOGPROBS_HD std::uint64_t largest_cta_items(const LaunchPlan& p) {
  return p.segments > kCtaItems ? p.segments : kCtaItems;
}

// ---- SPEC §2 steps 1-4 on the device -----------------------------------------------------------

struct DeviceRowTask {
  std::uint64_t logit_row;
  std::uint32_t token;
  std::uint64_t batch_item;
};

// Output row o of a validated batch: b is the last batch with loo[b] <= o (empty batches share
// their offset with the next one, so the last is the one that owns o).
LOGPROBS_HD DeviceRowTask map_output_row(std::uint64_t o, std::uint64_t batch_size, const std::uint32_t* loo,
                                         const std::uint32_t* lro, const std::uint32_t* tro,
                                         const std::uint32_t* tokens, const std::uint32_t* sampled) {
  std::uint64_t lo = 0, hi = batch_size;  // invariant: loo[lo] <= o < loo[hi]
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (loo[mid] <= o)
      lo = mid;
    else
      hi = mid;
  }
  const std::uint64_t b = lo;
  const std::uint64_t r = std::uint64_t(loo[b + 1]) - o - 1;
  const std::uint32_t token = r == 0 ? sampled[b] : tokens[std::uint64_t(tro[b + 1]) - r];
  return {std::uint64_t(lro[b + 1]) - r - 1, token, b};
}

}  // namespace logprobs::cuda_plan
