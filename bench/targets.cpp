#include "targets.hpp"

#include <omp.h>

#include <iostream>

#include "logprobs/backend.hpp"

namespace logprobs::bench {

std::vector<Target> all_targets(bool with_reference, bool with_variants) {
  std::vector<Target> targets;
  for (const Backend* backend : all_backends()) {
    // The reference and the canonical backend are definitions, not contenders.
    const bool definition = backend->name() == kReferenceName || backend->name() == kCanonicalName;
    if (definition && !with_reference) continue;
    if (!backend->variant_of().empty() && !with_variants) continue;
    if (const Availability a = backend->availability(); !a.available) {
      std::cerr << "logprobs-bench: skipping backend " << backend->name() << ": " << a.reason << "\n";
      continue;
    }
    targets.push_back({std::string(backend->name()),
                       [backend](const BatchData& batch, std::uint32_t k, int threads, ResultData& out) {
                         omp_set_num_threads(threads);
                         backend->run(batch.view(), k, out.view());
                       },
                       tolerance_for(*backend, {}), backend->features()});
  }
#ifdef LOGPROBS_BENCH_HAVE_TORCH
  targets.push_back(torch_peer());
#endif
  return targets;
}

}  // namespace logprobs::bench
