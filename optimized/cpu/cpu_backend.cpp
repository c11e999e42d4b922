// The `cpu` backend: threads, chunks and the per-row combination around the SIMD chunk scan.
//
// Every row is cut into chunks of kChunk entries (the last one shorter). The cut depends on V
// alone, and so does the order in which chunk statistics are combined (chunk order, in double),
// so a row's normalizer bits never depend on threads or on the rest of the batch (SPEC §6).
// The top-K is exact under the total order (value descending, token ascending) and comes out in
// token order whichever way the row was scanned (see candidate_buffer.hpp), so the token slots
// are just as independent of the schedule.
//
// Two schedules, bitwise identical in output:
//   - rows >= threads: each thread scans whole rows, chunk after chunk, with one candidate buffer
//     whose threshold carries across chunks (the cheapest: fewest admissions);
//   - rows < threads (decode): (row, chunk) pairs are scanned in parallel, each chunk with its own
//     buffer; the thread that finishes a row's last chunk appends its chunks' survivors in chunk
//     order.
#include <omp.h>

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
#include "row_kernel.hpp"

namespace logprobs {
namespace {

using cpu::CandidateBuffer;
using cpu::ChunkStats;

// 64 KiB of f32: a chunk's statistics are cheap to combine, and V = 128256 gives 8 chunks, enough
// to spread one decode row over the cores of a small machine.
constexpr std::uint64_t kChunk = 16384;

std::uint64_t chunk_count(std::uint64_t vocab) { return (vocab + kChunk - 1) / kChunk; }

// n = -(R + log(sum_c sum_c * exp(ref_c - R))), R = max_c ref_c; NaN for SPEC §3's NaN, +inf and
// only -inf rows (has_nan, R = +inf, R = -inf).
double normalizer(const ChunkStats* chunks, std::uint64_t count) {
  bool has_nan = false;
  float ref = -std::numeric_limits<float>::infinity();
  for (std::uint64_t c = 0; c < count; ++c) {
    has_nan |= chunks[c].has_nan;
    ref = std::max(ref, chunks[c].ref);
  }
  if (has_nan || !std::isfinite(ref)) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  for (std::uint64_t c = 0; c < count; ++c) {
    if (chunks[c].ref > -std::numeric_limits<float>::infinity()) {
      sum += chunks[c].sum * std::exp(double(chunks[c].ref) - double(ref));
    }
  }
  return -(double(ref) + std::log(sum));
}

// Writes one output row from the row's compacted buffer (<= K entries, token order).
void write_row(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, double n,
               const CandidateBuffer& top, const LogprobsOutput& out) {
  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  const std::uint64_t found = std::min<std::uint64_t>(top.size(), k);
  for (std::uint64_t slot = 0; slot < found; ++slot) {
    tokens[slot] = top.tokens()[slot];
    values[slot] = static_cast<float>(double(top.values()[slot]) + n);
  }
  const float padding = static_cast<float>(-std::numeric_limits<double>::infinity() + n);
  for (std::uint64_t slot = found; slot < k; ++slot) {
    tokens[slot] = static_cast<std::uint32_t>(batch.vocab);
    values[slot] = padding;
  }
  const float* x = batch.logit_row(task.logit_row).data();
  tokens[k] = task.token;
  values[k] = static_cast<float>(double(x[task.token]) + n);
}

struct ChunkResult {
  ChunkStats stats;
  std::vector<float> values;  // the chunk's survivors, token order
  std::vector<std::uint32_t> tokens;
};

// `cpu` dispatches to the best SIMD target at every call (so a test that forces a target with
// hwy::SetSupportedTargetsForTest moves it too); each variant `cpu-<target>` calls one target's
// kernel directly, so a campaign covers every target this CPU runs.
class CpuBackend final : public Backend {
 public:
  // The dispatching backend.
  CpuBackend()
      : name_("cpu"),
        description_("Highway SIMD (dynamic dispatch), one pass per row: online sum of exp and thresholded "
                     "top-K; OpenMP over rows and fixed chunks"),
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
  // f32 logits, any K; no temperatures or ranks yet.
  Features features() const override { return {.any_k = true}; }
  Availability availability() const override {
    if (target_ == 0 || (hwy::SupportedTargets() & target_) != 0) return {};
    return {false, std::string("this CPU does not run ") + hwy::TargetName(target_)};
  }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    const std::vector<RowTask> tasks = plan_rows(batch);
    const std::uint64_t chunks = chunk_count(batch.vocab);
    if (chunks == 1 || tasks.size() >= std::uint64_t(omp_get_max_threads())) {
      whole_rows(batch, tasks, k, out);
    } else {
      split_rows(batch, tasks, k, out);
    }
  }

 private:
  // Scans a whole row, chunk after chunk, into `buffer` (reset with K), starting from
  // `threshold`; fills stats (one per chunk) and leaves the buffer compacted.
  void scan_row(const float* x, std::uint64_t vocab, float threshold, CandidateBuffer& buffer,
                ChunkStats* stats) const {
    buffer.raise_threshold(threshold);
    for (std::uint64_t c = 0; c < chunk_count(vocab); ++c) {
      const std::uint64_t begin = c * kChunk, size = std::min(kChunk, vocab - begin);
      stats[c] = scan_(x + begin, size, static_cast<std::uint32_t>(begin), buffer);
    }
    buffer.compact();
  }

  // A speculative threshold that left fewer than K entries (see candidate_buffer.hpp): the top-K
  // again without it. The statistics do not depend on the threshold, so only the top-K is redone.
  void rescan_without_speculation(const float* x, std::uint64_t vocab, std::uint32_t k, CandidateBuffer& buffer,
                                  std::vector<ChunkStats>& scratch) const {
    buffer.reset(k);
    scan_row(x, vocab, -std::numeric_limits<float>::infinity(), buffer, scratch.data());
  }

  void whole_rows(const RaggedBatch& batch, const std::vector<RowTask>& tasks, std::uint32_t k,
                  const LogprobsOutput& out) const {
    const std::uint64_t chunks = chunk_count(batch.vocab);
#pragma omp parallel
    {
      CandidateBuffer buffer;
      std::vector<ChunkStats> stats(chunks), ignored(chunks);
#pragma omp for schedule(dynamic, 1)
      for (std::size_t t = 0; t < tasks.size(); ++t) {
        const float* x = batch.logit_row(tasks[t].logit_row).data();
        buffer.reset(k);
        const float speculative = buffer.speculative_threshold(x, batch.vocab);
        scan_row(x, batch.vocab, speculative, buffer, stats.data());
        if (speculative > -std::numeric_limits<float>::infinity() && buffer.size() < k) {
          rescan_without_speculation(x, batch.vocab, k, buffer, ignored);
        }
        write_row(batch, tasks[t], k, normalizer(stats.data(), chunks), buffer, out);
      }
    }
  }

  void split_rows(const RaggedBatch& batch, const std::vector<RowTask>& tasks, std::uint32_t k,
                  const LogprobsOutput& out) const {
    const std::uint64_t chunks = chunk_count(batch.vocab);
    std::vector<ChunkResult> results(tasks.size() * chunks);
    // Fewer rows than threads: the row samples are few and cheap, so take them serially.
    std::vector<float> speculative(tasks.size());
    {
      CandidateBuffer buffer;
      for (std::size_t t = 0; t < tasks.size(); ++t) {
        buffer.reset(k);
        speculative[t] = buffer.speculative_threshold(batch.logit_row(tasks[t].logit_row).data(), batch.vocab);
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
      std::vector<ChunkStats> stats(chunks), ignored(chunks);
#pragma omp for schedule(dynamic, 1)
      for (std::size_t item = 0; item < results.size(); ++item) {
        const std::size_t t = item / chunks;
        const float* x = batch.logit_row(tasks[t].logit_row).data();
        const std::uint64_t begin = (item % chunks) * kChunk, size = std::min(kChunk, batch.vocab - begin);
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
        r.stats = scan_(x + begin, size, static_cast<std::uint32_t>(begin), buffer);
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
          stats[c] = chunk.stats;
          for (std::size_t i = 0; i < chunk.values.size(); ++i) buffer.admit(chunk.values[i], chunk.tokens[i]);
        }
        buffer.compact();
        if (speculative[t] > -std::numeric_limits<float>::infinity() && buffer.size() < k) {
          rescan_without_speculation(x, batch.vocab, k, buffer, ignored);
        }
        write_row(batch, tasks[t], k, normalizer(stats.data(), chunks), buffer, out);
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
