// The campaign: every backend under test against the reference at several K, on the hand cases
// and then on random batches for a time budget, each failure shrunk and written as a file with
// the command that replays it. A backend is skipped, and the table says why, for a case that
// needs an optional part it lacks (SPEC §4).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "report.hpp"
#include "shard.hpp"

namespace logprobs {

// The K a campaign covers unless told otherwise: MAX's K = 2^L - 1 at the usual levels (none,
// one, a few, a heap that spills registers, thousands, the SPEC's maximum) and OpenAI's and
// vLLM's usual limits, 5 and 20.
inline const std::vector<std::uint32_t> kCampaignKs = {0, 1, 3, 5, 7, 20, 31, 255, 4095, 65535};

struct CampaignOptions {
  std::vector<const Backend*> backends;  // under test, each judged against the reference
  std::vector<std::uint32_t> ks = kCampaignKs;
  double time_budget_s = 60;               // for the random cases; the hand cases always run
  std::optional<std::uint64_t> max_cases;  // random cases at most
  std::uint64_t seed = 0;
  Tolerance tolerance;
  std::filesystem::path counterexample_dir = ".";
  int max_counterexamples = 4;  // files written at most (the first failure of each backend and K)
  int max_shrink_tries = 2000;
  std::string program = "logprobs-check";  // how the replay command names this tool
  bool progress = false;                   // a progress line on stderr (for a terminal)
  // This process's share: hand case h and random case i run where h % count, i % count is its
  // index, so N shards of one seed and --cases run exactly the cases of the unsharded run.
  Shard shard;
};

struct CampaignReport {
  std::vector<CellSummary> cells;  // backend by backend, K in the options' order
  std::uint64_t hand_cases = 0;    // run by this shard
  std::uint64_t random_cases = 0;  // run by this shard
  // The time budget ended the random cases before max_cases did (or there was no max_cases):
  // then the cases run depend on the machine's speed.
  bool stopped_by_time = false;
  double elapsed_s = 0;
  std::vector<CounterexampleFile> counterexamples;
};

// Runs the campaign. Writes a line per counterexample to `log` as it is found.
CampaignReport run_campaign(const CampaignOptions& options, std::ostream& log);

// The seed of random case `index` of a campaign with `seed`.
std::uint64_t case_seed(std::uint64_t seed, std::uint64_t index);

}  // namespace logprobs
