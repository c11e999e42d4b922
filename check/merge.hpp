// `logprobs-check merge`: the shards of one campaign (the same seed, --cases and options, run by
// the same build under the same contract) put back together. Sums of counts and maxima of errors
// are what the unsharded run computes, so the merged table equals it exactly; anything that
// would make the sum a different run is refused, naming the field.
#pragma once

#include <nlohmann/json.hpp>
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

// The largest count and time a report holds (docs/schemas/report-parts.schema.json): 2^53 - 1,
// exact in every JSON reader, and 10^12 s.
inline constexpr std::uint64_t kMaxReportCount = (std::uint64_t{1} << 53) - 1;
inline constexpr double kMaxReportSeconds = 1e12;

// Refuses (MergeError) runs whose tool version, contract version, build, seed, max_cases, K list,
// tolerance or backends under test differ, a shard count that differs, a shard given twice or
// missing, a shard the time budget stopped before its last case (complete: false), and counts
// whose sum exceeds kMaxReportCount. What it holds beside the runs is counted against `budget`
// when given; the first shard's JSON becomes the merged report's (moved: `runs` are consumed).
MergedCampaign merge_campaigns(std::vector<CampaignRun> runs, MemoryBudget* budget = nullptr);

}  // namespace logprobs
