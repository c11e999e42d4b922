// The campaign's JSON report as a file: what `campaign --json` writes and what `merge` reads
// back. Besides the report module's fields (tool, version, contract_version, build, tolerance,
// results) it holds what makes shards of one run recognisable as such: the seed, max_cases, the
// K list, the backends under test, the shard (index, count) and whether the shard ran every
// random case of its share (complete: false when the time budget ended it first).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "campaign.hpp"
#include "harness/memory_budget.hpp"

namespace logprobs {

nlohmann::json campaign_json(const CampaignOptions& options, const CampaignReport& report);

// A file that is not a campaign report of this tool, or breaks its schema; the message names the
// file and the field.
class CampaignFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One campaign report as read back.
struct CampaignRun {
  std::string path;
  nlohmann::json json;  // the whole document, for the fields merge compares as they are
  Shard shard;
  std::vector<CellSummary> cells;
  std::vector<CounterexampleFile> counterexamples;
  std::uint64_t hand_cases = 0;
  std::uint64_t random_cases = 0;
  bool complete = false;
  double elapsed_s = 0;
};

// A shard's report (campaign --json): a regular file, validated against the campaign report's
// schema before any field is read; its size, its JSON tree (strings included) and what is read out
// of it counted against `budget` when given (merge holds every report at once). Throws
// CampaignFileError (naming the file and the field), FileError, MemoryBudgetExceeded.
CampaignRun read_campaign_file(const std::string& path, MemoryBudget* budget = nullptr);
// The same for a report's text, named `path` in messages (the fuzz target reads through it).
CampaignRun parse_campaign_report(std::string text, const std::string& path, MemoryBudget* budget = nullptr);

// What a cell or a counterexample holds in memory, its texts included: what a budget is charged.
std::uint64_t held_bytes(const CellSummary& cell);
std::uint64_t held_bytes(const CounterexampleFile& file);

}  // namespace logprobs
