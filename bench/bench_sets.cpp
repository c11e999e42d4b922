#include "bench_sets.hpp"

namespace logprobs::bench {

std::optional<BenchSet> bench_set(std::string_view name, int all_cores) {
  std::vector<int> threads{1};
  if (all_cores > 1) threads.push_back(all_cores);
  const std::vector<Distribution> both{Distribution::normal, Distribution::ascending};

  if (name == "full") {
    BenchSet set{{}, {0, 1, 2, 3, 5, 8, 10, 12, 16}, both, threads, 0.5};
    for (std::uint64_t rows : {1, 8, 64, 256})
      for (std::uint64_t vocab : {32000, 128256, 152064, 262144}) set.shapes.emplace_back(rows, vocab);
    return set;
  }
  if (name == "ci") {
    // The headline shape (64 x 128256) and batch-1 decode at the same vocabulary.
    return BenchSet{{{64, 128256}, {1, 128256}}, {0, 3, 8, 12}, both, threads, 0.1};
  }
  if (name == "smoke") {
    return BenchSet{{{8, 32000}}, {0, 3, 16}, both, threads, 0.01};
  }
  return std::nullopt;
}

}  // namespace logprobs::bench
