// The `cpu` backend's split schedule (fewer rows than threads: a row cut into parts, runs of whole
// chunks scanned apart and merged), bit for bit against the `canonical` backend (SPEC §8), on rows
// built for its hazard and on random rows.
//
// The split schedule also runs here on one thread: with OpenMP's max-active-levels at 0 (what a
// caller inside its own parallel region gets), omp_get_max_threads() still reports the thread
// count, so the backend takes the split schedule with that many parts, and the team has one
// thread, which scans the parts in turn: the same parts and the same merge every run.
#include <gtest/gtest.h>
#include <omp.h>

#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "harness/judge.hpp"
#include "logprobs/canonical_arithmetic.hpp"

namespace logprobs {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::uint64_t kChunk = canonical::kGroupSegments * canonical::kSegment;  // the backend's chunk

// Every `cpu` backend: the dispatching one and each variant held to one SIMD target.
std::vector<const Backend*> cpu_backends() {
  std::vector<const Backend*> found;
  for (const Backend* b : all_backends())
    if ((b->name() == "cpu" || b->variant_of() == "cpu") && b->availability().available) found.push_back(b);
  return found;
}

// Runs the backends with `threads` OpenMP threads, in a team of one thread when
// `single_thread_team`; restores both settings.
class Schedule {
 public:
  Schedule(int threads, bool single_thread_team)
      : threads_(omp_get_max_threads()), levels_(omp_get_max_active_levels()) {
    omp_set_num_threads(threads);
    if (single_thread_team) omp_set_max_active_levels(0);
  }
  ~Schedule() {
    omp_set_num_threads(threads_);
    omp_set_max_active_levels(levels_);
  }
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

 private:
  int threads_, levels_;
};

// Empty when each backend gives `want` (the canonical bits) for the batch at K, else what differs.
std::string differences(const std::vector<const Backend*>& backends, const BatchData& batch, std::uint32_t k,
                        const ResultData& want) {
  std::string found;
  for (const Backend* b : backends) {
    const std::string difference = first_bit_difference(run_backend(*b, batch, k, true), want);
    if (!difference.empty()) found += std::string(b->name()) + ": " + difference + "\n";
  }
  return found;
}

ResultData canonical_bits(const BatchData& batch, std::uint32_t k) {
  return run_backend(*find_backend(kCanonicalName), batch, k, true);
}

TEST(CpuSplitSchedule, OneThreadTeamTakesTheSplitSchedule) {
  const Schedule schedule(2, true);
  EXPECT_EQ(omp_get_max_threads(), 2);  // what the backend reads to choose the schedule
  int team = 0;
#pragma omp parallel
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  EXPECT_EQ(team, 1);
}

// Chunk 0 (part 0 of two) holds K + 2 candidates, the last K of them its survivors, with its best
// survivor at position K in token order (the slot just past the survivors once the buffer is
// compacted, which still holds it); chunk 1 holds one entry between chunk 0's two smallest
// survivors. The row's top-K is chunk 0's best K - 1 and chunk 1's entry: a merge that counts
// any survivor twice (a read one past the survivors) drops chunk 1's entry.
TEST(CpuSplitSchedule, TheMergeNeverCountsASurvivorTwice) {
  for (const std::uint32_t k : {2u, 3u, 5u, 20u, 255u, 1023u}) {
    std::vector<float> x(2 * kChunk, kNegInf);
    x[0] = -5.0f;
    x[1] = -4.0f;
    for (std::uint32_t i = 2; i < k + 2; ++i) x[i] = float(i);  // survivors 2 .. K + 1
    std::swap(x[k], x[k + 1]);                                  // the best one at position K
    x[kChunk + 7] = 2.5f;                                       // between the two smallest
    const BatchData batch = single_row_batch(x, 3);
    const ResultData want = canonical_bits(batch, k);
    for (const bool single_thread_team : {true, false}) {
      const Schedule schedule(2, single_thread_team);
      EXPECT_EQ(differences(cpu_backends(), batch, k, want), "")
          << "K " << k << (single_thread_team ? ", a team of one thread" : ", 2 threads");
    }
  }
}

// Random rows of two to three chunks (and one entry off), ties and masks among them, at small
// and large K, on the split schedule of one thread and of 2 and 4 threads (the dispatching
// backend: the schedule is the same code on every target).
TEST(CpuSplitSchedule, RandomRowsGiveTheCanonicalBits) {
  std::mt19937_64 rng(61);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const std::vector<const Backend*> cpu = {find_backend("cpu")};
  for (const std::uint64_t vocab : {2 * kChunk - 1, 2 * kChunk + 1, 3 * kChunk}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> x(vocab);
      for (float& v : x) {
        v = normal(rng);
        if (kind == 1) v = float(int(v));              // a few values, many ties
        if (kind == 2 && rng() % 8 != 0) v = kNegInf;  // mostly masked
      }
      const BatchData batch = single_row_batch(x, static_cast<std::uint32_t>(rng() % vocab));
      for (const std::uint32_t k : {1u, 20u, 1023u}) {
        const ResultData want = canonical_bits(batch, k);
        for (const auto& [threads, single_thread_team] :
             {std::pair{2, true}, std::pair{2, false}, std::pair{4, false}}) {
          const Schedule schedule(threads, single_thread_team);
          EXPECT_EQ(differences(cpu, batch, k, want), "")
              << "V " << vocab << " kind " << kind << " K " << k << ", " << threads << " threads"
              << (single_thread_team ? " in a team of one" : "");
        }
      }
    }
  }
}

}  // namespace
}  // namespace logprobs
