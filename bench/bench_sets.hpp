// The benchmark matrices: `full` (the whole matrix), `ci` (about a minute on a 2-core
// machine), `cpu` (the cpu backend's speed table: optimized/cpu/README.md) and `smoke` (seconds;
// the ctest that proves the binary runs and its results are right).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_data.hpp"
#include "logprobs/batch.hpp"

namespace logprobs::bench {

struct BenchSet {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> shapes;  // (rows, vocab), in run order
  std::vector<std::uint32_t> ks;                                // top-K widths
  std::vector<LogitsDtype> dtypes;                              // of the logits
  std::vector<Distribution> dists;
  std::vector<int> threads;
  // --benchmark_min_time for this set unless the command line gives one (seconds).
  double default_min_time;
};

// The set of that name, with thread counts {1, all_cores} (just {1} on one core); nullopt if the
// name is unknown.
std::optional<BenchSet> bench_set(std::string_view name, int all_cores);

}  // namespace logprobs::bench
