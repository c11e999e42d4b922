// The top-K candidates of one row (or one chunk of a row), gathered in a single pass.
//
// Admission rule: an entry is admitted iff x > threshold(). The threshold starts at -inf, so
// NaN (every comparison false) and -inf never enter and +inf does (SPEC §2.6). With K = 0 the
// threshold is +inf and nothing enters.
//
// The buffer keeps its entries in ascending token order (they are admitted in scan order, chunks
// are scanned or appended in chunk order, and compaction is stable). When it fills, compact()
// keeps exactly the K best under the total order (value descending, token ascending) and raises
// the threshold to the K-th best value t. Why the later strict `x > t` filter loses nothing of the
// final top-K under that order: every later entry has a larger token than the K kept ones, so
// with x <= t it is beaten by all K of them.
//
// The result is therefore the exact top-K under a total order, a function of the row alone: the
// same whether the row is scanned by one thread with one buffer, or chunk by chunk with one
// buffer per chunk whose survivors are appended in chunk order (SPEC §6), and the same whatever
// the threshold happened to be along the way, as long as it never rejected a top-K member.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "row_source.hpp"

namespace logprobs::cpu {

// Aligned to a cache line: split_rows keeps one per part of a row in one array, written by
// different threads, and two of them sharing a line made each admission wait on the other core
// (1 x 128256, 2 threads: a part's scan at K = 255 took 44 us where it now takes 21).
class alignas(64) CandidateBuffer {
 public:
  // Room past capacity() for one block of admissions: the kernel admits at most one block
  // (kBlockVectors vectors of at most 16 floats) before it compacts.
  static constexpr std::size_t kBlockVectors = 4;
  static constexpr std::size_t kSlack = (kBlockVectors + 1) * 16;

  // Empties the buffer for a row or chunk whose top-k is wanted.
  void reset(std::uint32_t k);

  std::uint32_t k() const { return k_; }
  float threshold() const { return threshold_; }
  std::size_t size() const { return count_; }
  std::size_t capacity() const { return capacity_; }
  bool over_capacity() const { return count_ > capacity_; }
  const float* values() const { return values_.data(); }
  const std::uint32_t* tokens() const { return tokens_.data(); }

  // Where the SIMD kernel appends admitted entries; it then calls added(n).
  float* value_tail() { return values_.data() + count_; }
  std::uint32_t* token_tail() { return tokens_.data() + count_; }
  void added(std::size_t n) { count_ += n; }

  // One entry admitted by the rule above (the SIMD kernel admits through value_tail() and added();
  // the tests, through this). Requires tokens ascending across calls.
  void admit(float value, std::uint32_t token) {
    if (!(value > threshold_)) return;
    values_[count_] = value;
    tokens_[count_] = token;
    ++count_;
    if (count_ > capacity_) compact();
  }

  // Appends the survivors of a later part of the row (n <= K entries, tokens above every token
  // here) to a buffer reset for their merge, compacting first where they would not fit. Unlike
  // admit(), it keeps entries at or below the threshold until the next compaction drops them:
  // each is beaten by the K entries that set the threshold, whose tokens come first. The merge of
  // a decode step's two parts (1 x 128256, 2 threads, serial after them), best of 2000 calls on
  // the Xeon model 207: one admit() an entry 1.5 us at K = 255 and 5.5 at 1023, appended 0.1 and
  // 0.7.
  void append(const float* values, const std::uint32_t* tokens, std::size_t n);

  // Keeps the K best (value descending, token ascending), in token order, and raises the
  // threshold to the K-th best value when K entries remain.
  void compact();

  // Ascending rows defeat a running threshold: every entry beats the K-th best so far, and the
  // buffer compacts every K + 64 entries (and a plateau of ties later, in a 16-bit row, where the
  // rest of a run equal to the threshold is not admitted). Two compactions within 4 (K + 64)
  // entries of each other in one chunk are the sign (compact_at, the kernel's compaction, tells
  // where it is in the row): a random row's admissions thin out as K / position, so its first
  // compactions lie far apart (the second about (2K + 64) e^((K + 64) / K) entries in, 6.9k at
  // K = 20). Any second compaction in a chunk took every random row's first chunk for a sorted one
  // (at 1 x 128256, K = 20, its seeds cost a fifth of each half-row's scan); 2 (K + 64) missed
  // bf16's sorted rows (23% slower at K = 20). The kernel then asks for a seed from the entries not
  // yet scanned, [ahead, ahead + n): with t the K-th largest candidate among the last entries of
  // that range, at least K entries >= t are still to come and each will be admitted (the threshold
  // becomes the float just below t), so everything below t is beaten by K of them and may be
  // rejected. For ascending rows t is the chunk's exact K-th best. At most once per chunk
  // (start_chunk re-arms it), so a false alarm costs one selection over max(2K, 256) entries.
  void start_chunk();
  void compact_at(std::uint64_t position);
  bool wants_seed() const { return !seeded_ && compactions_close_; }
  // The entries not yet scanned are [begin, begin + n) of `row`.
  void seed_from_ahead(const RowSource& row, std::uint64_t begin, std::uint64_t n);

  // Large K: a running threshold admits about K (1 + ln(V / K)) entries of a random row (and
  // 2K + 64 before it first rises). A speculative threshold from a sample of the row cuts that
  // to 1.5-3K: t = the j-th largest sampled candidate, with j such that a little more than K row
  // entries are expected >= t. Entries >= t are admitted (threshold = the float just below t). It
  // holds if the row still yields K entries: every entry not admitted is < t <= each of them, so
  // they are the exact top-K. If fewer than K came in (a sample that lied, or a row with fewer
  // than K candidates), the caller rescans the row without it. Returns the threshold to raise
  // to, or -inf (no speculation, nothing to rescan) when K is too small or the row too short.
  //
  // The sample is kSampleRun consecutive entries (one cache line when the row is aligned) every
  // kSampleStride: a row is read from memory once, by the scan after this, so what the sample
  // costs is its cache misses; whole lines give 16 entries per miss where one entry per line
  // (the first design) spent most of the sample's time waiting on memory (perf: 15% of a K = 255
  // pass, on the load). Entries of one line are independent in a random row; where neighbouring
  // tokens are alike the sample is worth less, which costs admissions or a rescan, never bits
  // (and never a rescan for sorted rows: the bound by line maxima in the .cpp).
  static constexpr std::uint64_t kSampleRun = 16;
  static constexpr std::uint64_t kSampleStride = 1024;
  float speculative_threshold(const RowSource& row, std::uint64_t vocab);
  // Its sample and ranks at K: t = min(the l-th largest of the `lines` sampled lines' maxima, the
  // j-th largest sampled candidate), lines runs of kSampleRun every kSampleStride from entry 0; no
  // lines where there is no speculation: below kSpeculationFromK, and from where K is so large
  // against the sample that it would say little (K = 28056 at V = 128256, 6142 at 32000, 255 at
  // 4096), where the row is cut instead (cpu_backend.cpp's cut_from_row).
  static constexpr std::uint32_t kSpeculationFromK = 255;
  struct SamplePlan {
    std::uint64_t lines = 0, j = 0, l = 0;
  };
  static SamplePlan sample_plan(std::uint32_t k, std::uint64_t vocab);
  void raise_threshold(float t) { threshold_ = std::max(threshold_, t); }

  // Small K, after a scan that admitted nothing (admission by segment maxima, cpu_backend.cpp):
  // the threshold becomes the float just below b, the K-th largest of the n >= K segments' maxima
  // (each an entry of its segment, none NaN). The K segments of the largest maxima hold K entries
  // >= b, each of which is then admitted, so whatever is below b is beaten by K of them.
  void threshold_from_maxima(const float* maxima, std::size_t n);

  // Large K, where much of a row would be admitted (cpu_backend.cpp's cut_from_row): the top-K of
  // a whole row x[0, n) without a buffer. They are the entries above `kth` and the first `ties` of those equal to it,
  // in token order (the total order's tie-break): kth is the k-th largest, `ties` = k - how many
  // are above it. Found by selection in the bracket of a sample of x (below), so at the cost of
  // a pass over the row and a selection among the few in the bracket. x holds no NaN, and
  // 4 kBracketSample <= n, k < n. With fewer than k candidates, kth is -inf and ties 0: the cut is
  // every candidate, and the slots past them are padding. False when it cannot tell (the bracket
  // missed), which leaves the buffer's path to the caller.
  struct RowCut {
    float kth;
    std::size_t ties;
  };
  bool cut_of_row(const float* x, std::size_t n, std::uint32_t k, RowCut* cut);

  // Selection among at least 4 kBracketSample values (compactions at K >= 2016) starts from a
  // bracket taken from this many of them at a fixed stride (the .cpp says why it is exact).
  static constexpr std::size_t kBracketSample = 1024;

 private:
  std::uint32_t k_ = 0;
  float threshold_ = -std::numeric_limits<float>::infinity();
  std::size_t count_ = 0;
  std::size_t capacity_ = 0;
  std::vector<float> values_;
  std::vector<std::uint32_t> tokens_;
  std::vector<float> scratch_;       // the seed's or the speculation's sample
  std::vector<float> small_;         // selection workspace (the partition's last step)
  std::vector<float> parts_[3];      // the partition's rounds: the live values and the two sides
  std::vector<std::uint32_t> keys_;  // selection workspace (radix)
  std::vector<float> sample_;        // selection workspace (a bracket's sample, and the values in it)
  std::vector<float> bracket_;       // the values in a sample's bracket
  std::vector<float> inner_bracket_;  // those in a bracket within it
  bool seeded_ = false;
  int compactions_in_chunk_ = 0;
  std::uint64_t last_compaction_at_ = 0;
  bool compactions_close_ = false;

  // The k-th largest (1-based, 1 <= k <= n) of n non-NaN values, and the ways to it.
  float kth_largest(const float* values, std::size_t n, std::size_t k);
  // Both can also count the values above the k-th into *greater (where not null).
  float select_by_partition(const float* values, std::size_t n, std::size_t k, std::size_t* greater = nullptr);
  bool select_in_bracket(const float* values, std::size_t n, std::size_t k, float* kth, std::size_t* greater);
  bool bracket_kth(const float* values, std::size_t n, std::size_t k, std::vector<float>& out, std::size_t* inside,
                   std::size_t* above, bool* below_candidates);
  float select_by_radix(const float* values, std::size_t n, std::size_t k);
};

}  // namespace logprobs::cpu
