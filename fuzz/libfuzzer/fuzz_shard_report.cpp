// A shard report (campaign --json) of arbitrary bytes, read through merge's reader: it may only
// be refused (CampaignFileError, MemoryBudgetExceeded, MergeError), never crash, read an absent
// field or wrap a count. A report it accepts of a whole run (shard 0/1) is merged alone, and
// merge's own output must keep the campaign report's schema and be accepted when read back:
// merge refusing what it wrote was part of issue 24's finding 1 (a zero tolerance wrote
// "max_tolerance_used": null).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check/campaign_file.hpp"
#include "check/merge.hpp"
#include "check/report_schema.hpp"
#include "harness/memory_budget.hpp"

namespace logprobs::fuzz {
namespace {

void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz_shard_report: %s\n", what);
    std::abort();
  }
}

void merge_alone(CampaignRun run) {
  if (run.shard.count != 1) return;  // a shard of several is refused alone: "shards ... missing"
  MemoryBudget budget(std::uint64_t{64} << 20);
  std::vector<CampaignRun> runs;
  runs.push_back(std::move(run));
  MergedCampaign merged;
  try {
    merged = merge_campaigns(std::move(runs), &budget);
  } catch (const MergeError&) {
    return;  // a shard the time budget cut short, say
  }
  const std::string violation = schema_violation(merged.json, ReportSchema::campaign);
  if (!violation.empty()) std::fprintf(stderr, "fuzz_shard_report: merge wrote %s\n", violation.c_str());
  require(violation.empty(), "merge's output breaks the campaign report's schema");
  try {
    parse_campaign_report(merged.json.dump(2), "merged.json");
  } catch (const CampaignFileError& e) {
    std::fprintf(stderr, "fuzz_shard_report: %s\n", e.what());
    require(false, "merge refuses its own output");
  }
}

}  // namespace
}  // namespace logprobs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace logprobs;
  const std::string text(reinterpret_cast<const char*>(data), size);
  MemoryBudget budget(std::uint64_t{64} << 20);
  try {
    fuzz::merge_alone(parse_campaign_report(text, "shard.json", &budget));
  } catch (const CampaignFileError&) {
  } catch (const MemoryBudgetExceeded&) {
  }
  return 0;
}
