#include "bench_sets.hpp"

namespace logprobs::bench {

std::optional<BenchSet> bench_set(std::string_view name, int all_cores) {
  std::vector<int> threads{1};
  if (all_cores > 1) threads.push_back(all_cores);
  const std::vector<Distribution> both{Distribution::normal, Distribution::ascending};

  const std::vector<LogitsDtype> f32_bf16{LogitsDtype::f32, LogitsDtype::bf16};
  if (name == "full") {
    BenchSet set{{}, {0, 1, 3, 7, 20, 31, 255, 1023, 4095, 65535}, f32_bf16, both, threads, 0.5};
    for (std::uint64_t rows : {1, 8, 64, 256})
      for (std::uint64_t vocab : {32000, 128256, 152064, 262144}) set.shapes.emplace_back(rows, vocab);
    return set;
  }
  if (name == "ci") {
    // The headline shape (64 x 128256) and batch-1 decode at the same vocabulary; MAX's K at
    // levels 0, 3, 8, 12 and vLLM's usual 20; f32 and bf16 logits.
    return BenchSet{{{64, 128256}, {1, 128256}}, {0, 7, 20, 255, 4095}, f32_bf16, both, threads, 0.1};
  }
  if (name == "cpu") {
    // The rows of optimized/cpu/README.md's speed table (issue 25's targets): the headline shape
    // and batch-1 decode, K from 0 to every other token, and the row shapes selection is
    // sensitive to (Zipf-like, sorted).
    return BenchSet{{{64, 128256}, {1, 128256}},
                    {0, 7, 20, 255, 4095, 65535},
                    f32_bf16,
                    {Distribution::normal, Distribution::zipf, Distribution::ascending},
                    threads,
                    0.5};
  }
  if (name == "smoke") {
    return BenchSet{{{8, 32000}}, {0, 7, 20, 65535}, f32_bf16, both, threads, 0.01};
  }
  return std::nullopt;
}

}  // namespace logprobs::bench
