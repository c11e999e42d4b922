// `logprobs-check merge`: the shards of one campaign (the same seed, --cases and options, run by
// the same build under the same contract) put back together. Sums of counts and maxima of errors
// are what the unsharded run computes, so the merged table equals it exactly; anything that
// would make the sum a different run is refused, naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "campaign_file.hpp"

namespace logprobs {

class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MergedCampaign {
  std::vector<CellSummary> cells;
  std::vector<CounterexampleFile> counterexamples;  // every shard's, in shard order
  std::uint64_t hand_cases = 0;
  std::uint64_t random_cases = 0;
  std::uint32_t shards = 0;
  nlohmann::json json;  // a campaign report of the whole run (shard 0/1), as campaign --json writes one
};

// Refuses (MergeError) runs whose tool version, contract version, build, seed, max_cases, K list,
// tolerance or backends under test differ, a shard count that differs, a shard given twice or
// missing, and a shard the time budget stopped before its last case (complete: false).
MergedCampaign merge_campaigns(std::span<const CampaignRun> runs);

}  // namespace logprobs
