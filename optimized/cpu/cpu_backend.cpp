// The `cpu` backend: threads, chunks and the per-row combination around the SIMD chunk scan.
//
// Every row is cut into chunks of kChunk = 16384 entries (the last one shorter). The statistics
// are SPEC §8's canonical arithmetic (logprobs/canonical_arithmetic.hpp): each chunk reduces its
// segments by the pairwise tree, and the row reduces its chunks by the same tree, which is the
// tree over all its segments; so a row's bits depend neither on the threads nor on the SIMD
// target nor on the rest of the batch (SPEC §6, §8). The top-K is exact under the total order
// (value descending, token ascending) and comes out in token order whichever way the row was
// scanned (see candidate_buffer.hpp), so the token slots are just as independent of the schedule.
//
// Two schedules, bitwise identical in output:
//   - rows >= threads, or K > kSplitMaxK: each thread scans whole rows, chunk after chunk, with
//     one candidate buffer whose threshold carries across chunks (the cheapest: fewest admissions),
//     or at large K with none, the top-K cut from the row after the scan (cut_from_row);
//   - rows < threads (decode) at small K: (row, part) pairs are scanned in parallel, a part being
//     a run of whole chunks scanned like a row; the thread that finishes a row's last part appends
//     its parts' survivors in part order and reduces the chunks' partials.

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cctype>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "candidate_buffer.hpp"
#include "candidate_filters.hpp"
#include "hwy/targets.h"
#include "logprobs/backend.hpp"
#include "logprobs/openmp.hpp"
#include "row_kernel.hpp"
#include "row_scratch.hpp"

namespace logprobs {
namespace {

using cpu::CandidateBuffer;
using cpu::ChunkScan;
using cpu::kChunk;
using cpu::RowScratch;
using cpu::RowSource;
using cpu::thread_scratch;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::uint64_t chunk_count(std::uint64_t vocab) { return (vocab + kChunk - 1) / kChunk; }

// The row's statistics from its chunks' (the pairwise tree over them), and its rank count.
struct RowStats {
  double normalizer = 0;
  std::uint64_t rank = 0;
};

RowStats row_stats(std::span<const ChunkScan> chunks) {
  std::vector<canonical::Partial> parts(chunks.size());
  std::uint32_t flags = 0;
  RowStats stats;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    parts[c] = chunks[c].partial;
    flags |= chunks[c].flags;
    stats.rank += chunks[c].at_least_xs;
  }
  stats.normalizer = canonical::normalizer(canonical::pairwise_tree(parts.data(), parts.size()), flags);
  return stats;
}

// The evaluated token's slot (W - 1) and the rank of one output row.
void write_last_slot(const RowTask& task, const RowSource& row, std::uint32_t k, const RowStats& stats,
                     const LogprobsOutput& out) {
  out.row_tokens(task.output_row)[k] = task.token;
  out.row_values(task.output_row)[k] = canonical::output_value(row.at(task.token), stats.normalizer);
  if (out.ranks) out.lp_ranks[task.output_row] = static_cast<std::uint32_t>(stats.rank);
}

// Slots [found, k) of a row with fewer than K candidates: SPEC's padding (token V, value -inf + n).
void write_padding(const RaggedBatch& batch, const RowTask& task, std::uint64_t found, std::uint32_t k,
                   const RowStats& stats, const LogprobsOutput& out) {
  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  const float padding = canonical::output_value(kNegInf, stats.normalizer);
  for (std::uint64_t slot = found; slot < k; ++slot) {
    tokens[slot] = static_cast<std::uint32_t>(batch.vocab);
    values[slot] = padding;
  }
}

// Writes one output row from the row's compacted buffer (<= K entries, token order).
void write_row(const RaggedBatch& batch, const RowTask& task, const RowSource& row, std::uint32_t k,
               const RowStats& stats, const CandidateBuffer& top, const LogprobsOutput& out) {
  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  const std::uint64_t found = std::min<std::uint64_t>(top.size(), k);
  for (std::uint64_t slot = 0; slot < found; ++slot) {
    tokens[slot] = top.tokens()[slot];
    values[slot] = canonical::output_value(top.values()[slot], stats.normalizer);
  }
  write_padding(batch, task, found, k, stats, out);
  write_last_slot(task, row, k, stats, out);
}

// `cpu` dispatches to the best SIMD target at every call (so a test that forces a target with
// hwy::SetSupportedTargetsForTest moves it too); each variant `cpu-<target>` calls one target's
// kernel directly, so a campaign covers every target this CPU runs.
class CpuBackend final : public Backend {
 public:
  // The dispatching backend.
  CpuBackend()
      : name_("cpu"),
        description_(
            "Highway SIMD (dynamic dispatch), SPEC §8's canonical arithmetic in one read per row and a "
            "thresholded top-K; OpenMP over rows and fixed chunks"),
        scan_(&cpu::scan_chunk) {}
  // The variant held to one target.
  explicit CpuBackend(const cpu::TargetKernel& kernel)
      : name_("cpu-" + lowercase(hwy::TargetName(kernel.target))),
        description_(std::string("the cpu kernel held to ") + hwy::TargetName(kernel.target)),
        scan_(kernel.scan),
        target_(kernel.target) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  std::string_view variant_of() const override { return target_ == 0 ? std::string_view() : "cpu"; }
  Features features() const override { return Features::all(); }
  bool claims_canonical_arithmetic() const override { return true; }
  Availability availability() const override {
    if (target_ == 0 || (hwy::SupportedTargets() & target_) != 0) return {};
    return {false, std::string("this CPU does not run ") + hwy::TargetName(target_)};
  }

 protected:
  // Splitting a row pays only while its merge is small: each part's survivors (up to K) are
  // merged on one thread after the parallel scans, so the serial part grows with K while the
  // parallel part does not. Measured on 1 x 128256 f32 at 2 threads (two runs each), split into
  // parts against whole rows: 1.1x faster at K = 7 to 1023, 0.94x at K = 4095, 0.41x at K = 65535.
  static constexpr std::uint32_t kSplitMaxK = 1023;

  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    const std::vector<RowTask> tasks = plan_rows(batch);
    if (chunk_count(batch.vocab) == 1 || tasks.size() >= std::uint64_t(openmp_max_threads()) || k > kSplitMaxK) {
      whole_rows(batch, tasks, k, out);
    } else {
      split_rows(batch, tasks, k, out);
    }
  }

 private:
  cpu::ChunkInput chunk_input(const RowSource& row, std::uint64_t vocab, std::uint64_t c, bool ranks, float xs) const {
    const std::uint64_t begin = c * kChunk;
    return {&row, begin, std::min(kChunk, vocab - begin), vocab, ranks, xs, {}};
  }

  // Scans chunks [first, first + chunks.size()) of a row, chunk after chunk, into `buffer` (reset
  // with K), starting from `threshold`; fills one ChunkScan per chunk and leaves the buffer
  // compacted. A whole row from chunk 0, or a part of one (split_rows).
  void scan_chunks(const RowSource& row, std::uint64_t vocab, float threshold, bool ranks, float xs,
                   CandidateBuffer& buffer, std::uint64_t first, std::span<ChunkScan> chunks) const {
    const std::uint64_t begin = first * kChunk, end = std::min(vocab, (first + chunks.size()) * kChunk);
    const bool by_maxima = admits_by_maxima(buffer.k(), canonical::segment_count(end - begin));
    buffer.raise_threshold(by_maxima ? std::numeric_limits<float>::infinity() : threshold);
    for (std::uint64_t c = 0; c < chunks.size(); ++c)
      chunks[c] = scan_(chunk_input(row, vocab, first + c, ranks, xs), buffer);
    if (by_maxima) admit_by_maxima(row, vocab, begin, end, chunks, buffer);
    buffer.compact();
  }

  // Small K: admission by segment maxima. With a running threshold a random row admits about
  // K (1 + ln(V / K)) entries, most of them early, and each tile that admits is a mispredicted
  // branch amid the exp's arithmetic: 1 x 128256 f32 at 1 thread (Xeon model 207) took 1.08x K =
  // 0's time at K = 7 and 1.17x at 20, and 1.00x and 1.01x with the row's exact K-th value as the
  // threshold from the start (timing only). So the scan admits nothing (threshold +inf) and keeps
  // each segment's largest x; the threshold then goes just below b, the K-th largest of those
  // maxima (CandidateBuffer::threshold_from_maxima), and the segments whose max is above it are
  // admitted, in token order as the buffer requires: about K segments read again from cache, and
  // of a random row about K entries (S ln(S / (S - K)) of S segments). Where the largest entries
  // crowd into few segments (sorted rows), those are admitted whole, and the buffer's seed from
  // the last one's end (candidate_buffer.hpp) raises the threshold as in a scan. Kept to K <= S / 2:
  // what is read again grows with K. Measured: 1.04x K = 0's time at K = 7, 1.08x at 20.
  static constexpr std::uint32_t kMaximaMaxK = 64;
  static bool admits_by_maxima(std::uint32_t k, std::uint64_t segments) {
    return k >= 1 && k <= kMaximaMaxK && 2 * std::uint64_t{k} <= segments;
  }

  void admit_by_maxima(const RowSource& row, std::uint64_t vocab, std::uint64_t begin, std::uint64_t end,
                       std::span<const ChunkScan> chunks, CandidateBuffer& buffer) const {
    thread_local std::vector<float> maxima;              // the scanned segments', in token order
    thread_local std::vector<std::uint32_t> candidates;  // those whose max is above the threshold
    maxima.clear();
    for (std::uint64_t at = begin; const ChunkScan& chunk : chunks) {
      const std::uint64_t segments = canonical::segment_count(std::min(kChunk, end - at));
      maxima.insert(maxima.end(), chunk.segment_max.begin(), chunk.segment_max.begin() + segments);
      at += kChunk;
    }
    buffer.threshold_from_maxima(maxima.data(), maxima.size());
    candidates.clear();
    const std::uint64_t first = begin / canonical::kSegment;
    for (std::size_t s = 0; s < maxima.size(); ++s)
      if (maxima[s] > buffer.threshold()) candidates.push_back(static_cast<std::uint32_t>(first + s));
    if (candidates.empty()) return;
    scan_(cpu::ChunkInput{&row, 0, 0, vocab, false, 0.0f, candidates}, buffer);
  }

  // A speculative threshold that left fewer than K entries (see candidate_buffer.hpp): the top-K
  // again without it. The statistics do not depend on the threshold, so only the top-K is redone.
  void rescan_without_speculation(const RowSource& row, std::uint64_t vocab, std::uint32_t k, CandidateBuffer& buffer,
                                  std::vector<ChunkScan>& scratch) const {
    buffer.reset(k);
    scan_chunks(row, vocab, kNegInf, false, 0.0f, buffer, 0, scratch);
  }

  // Large K: the scan admits nothing, and the top-K is cut from the row after it
  // (CandidateBuffer::cut_of_row, write_top_slots). Through the buffer, most of the row was admitted
  // (72k entries at 1 x 128256, K = 65535), compacted and copied out, each top entry stored three
  // times and read back twice; cut, the row is read twice more (from cache) and each slot stored
  // once. The cut's passes cost the same at any K; the buffer's cost is small while a speculative
  // threshold keeps its admissions near K, and jumps where the speculation stops (its sample would
  // say little: CandidateBuffer::sample_plan), since it then admits 2K + 64 entries before its
  // threshold first rises. So the cut takes over there, for every dtype. Before, the rules were
  // shares of V (f32 rows from V / 4, 16-bit rows and temperatures from V / 2, as measured on the
  // Xeon model 207), and the rows between the speculation's end and them went through the buffer
  // unspeculated. Zen 5, 1 thread, this rule against those, calls in turn in one process (the
  // median of 10 rounds' ratios): V = 128256 at K = 30000 f32 0.61-0.63x the time (1 and 64 rows),
  // bf16 0.70-0.71x (and at 50000), T = 0.7 0.89-1.00x; V = 32000 at K = 7000 f32 0.61-0.63x, bf16
  // 0.66-0.70x, T = 0.7 0.89-0.91x; V = 8192 at K = 1500 0.49x / 0.51x / 0.70x, V = 4096 at K = 600
  // 0.62x / 0.65x / 0.79x; K = 4095 and 65535 of 128256 1.00x. Forcing the cut where the
  // speculation runs took 1.2-1.6x the time just before its end (K = 28000 of 128256, 6100 of
  // 32000, 2800 of 16384, 1000 of 8192) and 1.4-2.8x at K = 255 to 16383 of 128256.
  static bool cut_from_row(std::uint32_t k, std::uint64_t vocab) {
    return k >= CandidateBuffer::kSpeculationFromK && k < vocab && vocab >= 4 * CandidateBuffer::kBracketSample &&
           CandidateBuffer::sample_plan(k, vocab).lines == 0;
  }

  // The top slots cut from the row (the padding past them where it holds fewer than K candidates),
  // and the last slot; false (nothing written) where the cut cannot be taken: a NaN in the row (the
  // selection takes none; a finite normalizer says there is none, nor a +inf), a missed bracket.
  static bool write_cut_row(const RaggedBatch& batch, const RowTask& task, const RowSource& row, std::uint32_t k,
                            const RowStats& stats, RowScratch& scratch, const LogprobsOutput& out) {
    if (!std::isfinite(stats.normalizer)) return false;
    const float* x = row.plain_row();
    if (!row.plain()) {
      scratch.x.resize(batch.vocab);
      row.read(0, batch.vocab, scratch.x.data());
      x = scratch.x.data();
    }
    CandidateBuffer::RowCut cut;
    if (!scratch.buffer.cut_of_row(x, batch.vocab, k, &cut)) return false;
    // K entries pass the cut, or every candidate where there are fewer.
    const std::size_t written =
        cpu::write_top_slots(x, batch.vocab, cut.kth, cut.ties, stats.normalizer, out.row_values(task.output_row),
                             out.row_tokens(task.output_row), k);
    write_padding(batch, task, written, k, stats, out);
    write_last_slot(task, row, k, stats, out);
    return true;
  }

  void whole_row(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const LogprobsOutput& out,
                 RowScratch& scratch) const {
    const RowSource row(batch, task);
    const float xs = out.ranks ? row.at(task.token) : 0.0f;
    CandidateBuffer& buffer = scratch.buffer;
    const bool cut = cut_from_row(k, batch.vocab);
    buffer.reset(cut ? 0 : k);
    const float speculative = buffer.speculative_threshold(row, batch.vocab);
    scan_chunks(row, batch.vocab, speculative, out.ranks, xs, buffer, 0, scratch.scans);
    const RowStats stats = row_stats(scratch.scans);
    if (cut && write_cut_row(batch, task, row, k, stats, scratch, out)) return;
    if (cut || (speculative > kNegInf && buffer.size() < k))
      rescan_without_speculation(row, batch.vocab, k, buffer, scratch.ignored);
    write_row(batch, task, row, k, stats, buffer, out);
  }

  void whole_rows(const RaggedBatch& batch, const std::vector<RowTask>& tasks, std::uint32_t k,
                  const LogprobsOutput& out) const {
    const std::uint64_t chunks = chunk_count(batch.vocab);
    // One row or one thread: no parallel region. Entering one, even for a team of one, cost
    // 3.7 us a call on the Zen 5 VM, where libgomp's futex calls are slow system calls (1 x 32000
    // f32, K = 0, 1 thread: 7.2 -> 3.5 us; 1 x 128256: 16.7 -> 13.7 us). A plain loop, not an
    // orphaned `omp for`, which inside a caller's parallel region would share the rows with
    // threads that are not in this call.
    const int threads = openmp_max_threads();
    if (tasks.size() <= 1 || threads == 1) {
      RowScratch& scratch = thread_scratch(chunks);
      for (const RowTask& task : tasks) whole_row(batch, task, k, out, scratch);
      return;
    }
    // Runs of 4 rows a grab where there are rows enough: pass 2 asks for the start of the row after
    // its own (row_kernel.cpp), which is then mostly the same thread's next row, where with one row
    // a grab it was mostly the other thread's. Calls in turn in one process on Zen 5, 64 x 128256
    // f32 at 2 threads: 0.95-0.97x the time at K = 0 to 65535 (bf16 1.00x; 16 rows 0.98x). Larger
    // runs leave a longer tail: 16 rows a grab read 1.11x at K = 0, and a static split 0.93x in two
    // runs and 1.18x in one.
    const int rows_per_grab = tasks.size() >= 8 * std::size_t(threads) ? 4 : 1;
    // nowait: the region's end waits for every thread anyway (split_rows: what a second wait cost).
#pragma omp parallel
    {
      RowScratch& scratch = thread_scratch(chunks);
#pragma omp for schedule(dynamic, rows_per_grab) nowait
      for (std::size_t t = 0; t < tasks.size(); ++t) whole_row(batch, tasks[t], k, out, scratch);
    }
  }

  // Fewer rows than threads: each row is cut into `parts` runs of whole chunks, as many as the
  // threads give it, and each part is scanned like a whole row (one buffer, its threshold carried
  // from chunk to chunk); the thread that finishes a row's last part merges the parts' survivors
  // in part order, which is token order. Parts of one run of chunks, not one item per chunk:
  // a chunk's fresh buffer admitted 2K + 64 entries and compacted several times, and each
  // chunk's survivors were compacted again and copied, which at 1 x 128256, K = 20 left 2 threads
  // 1.07x faster than one.
  void split_rows(const RaggedBatch& batch, const std::vector<RowTask>& tasks, std::uint32_t k,
                  const LogprobsOutput& out) const {
    const std::uint64_t chunks = chunk_count(batch.vocab);
    const std::uint64_t threads = std::uint64_t(openmp_max_threads());
    if (tasks.empty()) return;
    const std::uint64_t parts = std::min(chunks, (threads + tasks.size() - 1) / tasks.size());
    // The step's state, kept by the calling thread from call to call (row_scratch.hpp says why).
    RowScratch& caller = thread_scratch(chunks);
    RowScratch::SplitState& state = caller.split;
    std::vector<RowSource>& rows = state.rows;
    rows.clear();
    for (const RowTask& task : tasks) rows.emplace_back(batch, task);
    // The row samples are few and cheap (fewer rows than threads), so take them serially.
    std::vector<float>& speculative = state.speculative;
    std::vector<float>& xs = state.xs;
    speculative.resize(tasks.size());
    xs.resize(tasks.size());
    CandidateBuffer& sampler = caller.buffer;
    for (std::size_t t = 0; t < tasks.size(); ++t) {
      sampler.reset(k);
      speculative[t] = sampler.speculative_threshold(rows[t], batch.vocab);
      xs[t] = out.ranks ? rows[t].at(tasks[t].token) : 0.0f;
    }
    // Item t * parts + p is part p of row t: its buffer, and its chunks' statistics in scans (each
    // written by scan_chunks before it is read).
    if (state.parts.size() < tasks.size() * parts) state.parts.resize(tasks.size() * parts);
    const std::span<CandidateBuffer> survivors(state.parts.data(), tasks.size() * parts);
    std::vector<ChunkScan>& scans = state.scans;
    scans.resize(tasks.size() * chunks);
    // The thread that scans a row's last outstanding part also merges the row, so the whole step
    // is one parallel loop with no barrier in between (a barrier costs a scheduler quantum on a
    // busy machine). Which thread merges does not matter: it merges in part order. nowait: the
    // region's end waits for every thread anyway, and the loop's own barrier was a second wait;
    // without it a decode step (1 x 128256 f32 at 2 threads, calls in turn in one process on Zen
    // 5) takes 0.88x the time at K = 0, 0.90x at 20 and 255, 0.91-0.93x at 1023.
    std::vector<std::atomic<std::uint64_t>> parts_left(tasks.size());
    for (auto& left : parts_left) left.store(parts, std::memory_order_relaxed);
#pragma omp parallel
    {
      RowScratch& scratch = thread_scratch(chunks);
#pragma omp for schedule(dynamic, 1) nowait
      for (std::size_t item = 0; item < survivors.size(); ++item) {
        const std::size_t t = item / parts, p = item % parts;
        CandidateBuffer& buffer = survivors[item];
        buffer.reset(k);
        const std::uint64_t first = p * chunks / parts, last = (p + 1) * chunks / parts;
        scan_chunks(rows[t], batch.vocab, speculative[t], out.ranks, xs[t], buffer, first,
                    std::span(scans).subspan(t * chunks + first, last - first));
        // acq_rel: the merging thread sees every other part's result.
        if (parts_left[t].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;

        CandidateBuffer& merged = scratch.buffer;
        merged.reset(k);
        for (std::uint64_t q = 0; q < parts; ++q) {
          const CandidateBuffer& part = survivors[t * parts + q];
          merged.append(part.values(), part.tokens(), part.size());
        }
        merged.compact();
        if (speculative[t] > kNegInf && merged.size() < k)
          rescan_without_speculation(rows[t], batch.vocab, k, merged, scratch.ignored);
        const std::span<const ChunkScan> row_scans(scans.data() + t * chunks, chunks);
        write_row(batch, tasks[t], rows[t], k, row_stats(row_scans), merged, out);
      }
    }
  }

  static std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  std::string name_;
  std::string description_;
  cpu::ChunkScanner scan_;
  std::int64_t target_ = 0;  // 0: dispatch
};

}  // namespace

std::vector<std::unique_ptr<Backend>> make_cpu_backends() {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<CpuBackend>());
  for (const cpu::TargetKernel& kernel : cpu::compiled_kernels())
    backends.push_back(std::make_unique<CpuBackend>(kernel));
  return backends;
}

}  // namespace logprobs
