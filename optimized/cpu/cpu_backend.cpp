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
//     one candidate buffer whose threshold carries across chunks (the cheapest: fewest admissions);
//   - rows < threads (decode) at small K: (row, chunk) pairs are scanned in parallel, each chunk
//     with its own buffer; the thread that finishes a row's last chunk appends its chunks'
//     survivors in chunk order and reduces their partials.

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "candidate_buffer.hpp"
#include "hwy/targets.h"
#include "logprobs/backend.hpp"
#include "logprobs/openmp.hpp"
#include "row_kernel.hpp"

namespace logprobs {
namespace {

using cpu::CandidateBuffer;
using cpu::ChunkScan;
using cpu::kChunk;
using cpu::RowSource;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::uint64_t chunk_count(std::uint64_t vocab) { return (vocab + kChunk - 1) / kChunk; }

// The row's statistics from its chunks' (the pairwise tree over them), and its rank count.
struct RowStats {
  double normalizer = 0;
  std::uint64_t rank = 0;
};

RowStats row_stats(std::vector<ChunkScan>& chunks) {
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
  const float padding = canonical::output_value(kNegInf, stats.normalizer);
  for (std::uint64_t slot = found; slot < k; ++slot) {
    tokens[slot] = static_cast<std::uint32_t>(batch.vocab);
    values[slot] = padding;
  }
  tokens[k] = task.token;
  values[k] = canonical::output_value(row.at(task.token), stats.normalizer);
  if (out.ranks) out.lp_ranks[task.output_row] = static_cast<std::uint32_t>(stats.rank);
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
  // Splitting a row pays only while its merge is small: each chunk's survivors (up to K) are
  // merged on one thread after the parallel scans, so the serial part grows with K while the
  // parallel part does not. Measured on 1 x {32000, 128256} f32 at 2 threads (median of 5):
  // split is 1.1x faster at K = 7, even at K = 255 and 1023, 0.93x and 0.74x at K = 4095 and
  // 0.24x at K = 65535, where every chunk keeps all its entries.
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
    return {&row, begin, std::min(kChunk, vocab - begin), vocab, ranks, xs};
  }

  // Scans a whole row, chunk after chunk, into `buffer` (reset with K), starting from
  // `threshold`; fills one ChunkScan per chunk and leaves the buffer compacted.
  void scan_row(const RowSource& row, std::uint64_t vocab, float threshold, bool ranks, float xs,
                CandidateBuffer& buffer, std::vector<ChunkScan>& chunks) const {
    buffer.raise_threshold(threshold);
    for (std::uint64_t c = 0; c < chunks.size(); ++c) chunks[c] = scan_(chunk_input(row, vocab, c, ranks, xs), buffer);
    buffer.compact();
  }

  // A speculative threshold that left fewer than K entries (see candidate_buffer.hpp): the top-K
  // again without it. The statistics do not depend on the threshold, so only the top-K is redone.
  void rescan_without_speculation(const RowSource& row, std::uint64_t vocab, std::uint32_t k, CandidateBuffer& buffer,
                                  std::vector<ChunkScan>& scratch) const {
    buffer.reset(k);
    scan_row(row, vocab, kNegInf, false, 0.0f, buffer, scratch);
  }

  void whole_rows(const RaggedBatch& batch, const std::vector<RowTask>& tasks, std::uint32_t k,
                  const LogprobsOutput& out) const {
    const std::uint64_t chunks = chunk_count(batch.vocab);
#pragma omp parallel
    {
      CandidateBuffer buffer;
      std::vector<ChunkScan> scans(chunks), ignored(chunks);
#pragma omp for schedule(dynamic, 1)
      for (std::size_t t = 0; t < tasks.size(); ++t) {
        const RowSource row(batch, tasks[t]);
        const float xs = out.ranks ? row.at(tasks[t].token) : 0.0f;
        buffer.reset(k);
        const float speculative = buffer.speculative_threshold(row, batch.vocab);
        scan_row(row, batch.vocab, speculative, out.ranks, xs, buffer, scans);
        if (speculative > kNegInf && buffer.size() < k)
          rescan_without_speculation(row, batch.vocab, k, buffer, ignored);
        write_row(batch, tasks[t], row, k, row_stats(scans), buffer, out);
      }
    }
  }

  struct ChunkResult {
    ChunkScan scan;
    std::vector<float> values;  // the chunk's survivors, token order
    std::vector<std::uint32_t> tokens;
  };

  void split_rows(const RaggedBatch& batch, const std::vector<RowTask>& tasks, std::uint32_t k,
                  const LogprobsOutput& out) const {
    const std::uint64_t chunks = chunk_count(batch.vocab);
    std::vector<ChunkResult> results(tasks.size() * chunks);
    std::vector<RowSource> rows;
    for (const RowTask& task : tasks) rows.emplace_back(batch, task);
    // Fewer rows than threads: the row samples are few and cheap, so take them serially.
    std::vector<float> speculative(tasks.size()), xs(tasks.size());
    {
      CandidateBuffer buffer;
      for (std::size_t t = 0; t < tasks.size(); ++t) {
        buffer.reset(k);
        speculative[t] = buffer.speculative_threshold(rows[t], batch.vocab);
        xs[t] = out.ranks ? rows[t].at(tasks[t].token) : 0.0f;
      }
    }
    // The thread that scans a row's last outstanding chunk also merges the row, so the whole step
    // is one parallel loop with no barrier in between (a barrier costs a scheduler quantum on a
    // busy machine). Which thread merges does not matter: it merges in chunk order.
    std::vector<std::atomic<std::uint64_t>> chunks_left(tasks.size());
    for (auto& left : chunks_left) left.store(chunks, std::memory_order_relaxed);
    //
    // A chunk's buffer starts from the K-th best of the survivors this thread kept from earlier
    // chunks of the same row (`carried`), not from nothing, which would admit 2K + 64 entries and
    // compact several times in every chunk. Why it loses nothing: an entry <= that threshold is
    // beaten by K survivors of earlier chunks, which have smaller tokens and reach the merge.
    // Which thread scanned what changes only how much is admitted, never the merged top-K.
#pragma omp parallel
    {
      CandidateBuffer buffer, carried;
      std::size_t carried_row = tasks.size(), last_item = 0;  // none yet
      std::vector<ChunkScan> scans(chunks), ignored(chunks);
#pragma omp for schedule(dynamic, 1)
      for (std::size_t item = 0; item < results.size(); ++item) {
        const std::size_t t = item / chunks;
        // Only earlier chunks may carry (their survivors must have the smaller tokens); OpenMP
        // hands dynamic iterations out in increasing order, but that is not promised.
        if (t != carried_row || item < last_item) {
          carried.reset(k);
          carried_row = t;
        }
        last_item = item;
        buffer.reset(k);
        buffer.raise_threshold(std::max(speculative[t], carried.threshold()));
        ChunkResult& r = results[item];
        r.scan = scan_(chunk_input(rows[t], batch.vocab, item % chunks, out.ranks, xs[t]), buffer);
        buffer.compact();
        r.values.assign(buffer.values(), buffer.values() + buffer.size());
        r.tokens.assign(buffer.tokens(), buffer.tokens() + buffer.size());
        for (std::size_t i = 0; i < buffer.size(); ++i) carried.admit(buffer.values()[i], buffer.tokens()[i]);
        carried.compact();
        // acq_rel: the merging thread sees every other chunk's result.
        if (chunks_left[t].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;

        buffer.reset(k);
        for (std::uint64_t c = 0; c < chunks; ++c) {
          const ChunkResult& chunk = results[t * chunks + c];
          scans[c] = chunk.scan;
          for (std::size_t i = 0; i < chunk.values.size(); ++i) buffer.admit(chunk.values[i], chunk.tokens[i]);
        }
        buffer.compact();
        if (speculative[t] > kNegInf && buffer.size() < k)
          rescan_without_speculation(rows[t], batch.vocab, k, buffer, ignored);
        write_row(batch, tasks[t], rows[t], k, row_stats(scans), buffer, out);
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
