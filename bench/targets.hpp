// What the benchmarks time: every available registered backend, plus peers that are not
// backends (libtorch), behind one interface so each runs on the same data and outputs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/judge.hpp"

namespace logprobs::bench {

struct Target {
  std::string name;
  // Computes the batch's outputs at top-K width `k` with `threads` threads into `out` ([N, K + 1]).
  std::function<void(const BatchData& batch, std::uint32_t k, int threads, ResultData& out)> run;
  Tolerance tolerance;  // what --verify judges it by (SPEC §5: one f32 chain for the max port)
  Features features = Features::all();  // the optional parts it runs (a backend's own; the peers all)
};

// Every available backend of logprobs::all_backends(), then the peers this build has. Only when
// asked: the reference and `canonical` (definitions the others are judged by, not contenders) and variants
// (a backend held to one configuration, such as `cpu-sse4`: for per-target figures).
// Unavailable backends are skipped with a line on stderr saying why.
std::vector<Target> all_targets(bool with_reference, bool with_variants);

// The libtorch peer; defined only when the build found libtorch (LOGPROBS_BENCH_HAVE_TORCH).
Target torch_peer();

}  // namespace logprobs::bench
