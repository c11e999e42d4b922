#include "merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <span>

namespace logprobs {
namespace {

// The fields that make two reports shards of one run, as JSON pointers: the build and contract,
// then the options that decide which cases run and how they are judged.
const char* const kSameRunFields[] = {
    "/version",
    "/contract_version",
    "/build/version",
    "/build/commit",
    "/build/compiler",
    "/build/build_type",
    "/seed",
    "/max_cases",
    "/k",
    "/tolerance/ulps",
    "/tolerance/norm_ulps",
    "/tolerance/sum_rule",
    "/tolerance/sigma",
    "/tolerance/floor",
    "/backends_under_test",
    "/shard/count",
};

std::string value_at(const nlohmann::json& json, const char* pointer) {
  const nlohmann::json::json_pointer at(pointer);
  return json.contains(at) ? json.at(at).dump() : "missing";
}

std::string field_name(const char* pointer) {
  std::string name = std::string(pointer).substr(1);
  std::replace(name.begin(), name.end(), '/', '.');
  return name;
}

void check_same_run(const std::vector<CampaignRun>& runs) {
  const CampaignRun& first = runs.front();
  for (const CampaignRun& run : std::span(runs).subspan(1))
    for (const char* pointer : kSameRunFields) {
      const std::string want = value_at(first.json, pointer), got = value_at(run.json, pointer);
      if (got != want)
        throw MergeError(fmt::format("field '{}' differs: {} in {} but {} in {}; these are not shards of one run",
                                     field_name(pointer), want, first.path, got, run.path));
    }
  for (const CampaignRun& run : runs) {
    if (run.json.at("max_cases").is_null())
      throw MergeError(
          fmt::format("field 'max_cases' is null in {}: a run without --cases depends on the machine's "
                      "speed, so merge takes only runs of a fixed --cases",
                      run.path));
    if (!run.complete)
      throw MergeError(
          fmt::format("field 'complete' is false in {} (shard {}/{}): its time budget ended it after {} "
                      "random cases, before its share of --cases; rerun it with a larger --time",
                      run.path, run.shard.index, run.shard.count, run.random_cases));
    if (run.cells.size() != first.cells.size())
      throw MergeError(fmt::format("field 'results' has {} entries in {} but {} in {}", run.cells.size(), run.path,
                                   first.cells.size(), first.path));
    for (std::size_t i = 0; i < run.cells.size(); ++i)
      if (run.cells[i].backend != first.cells[i].backend || run.cells[i].k != first.cells[i].k)
        throw MergeError(fmt::format("field 'results' entry {} is {} K={} in {} but {} K={} in {}", i,
                                     run.cells[i].backend, run.cells[i].k, run.path, first.cells[i].backend,
                                     first.cells[i].k, first.path));
  }
}

// Each shard index of 0..count-1 exactly once; returns the runs in shard order.
std::vector<CampaignRun*> in_shard_order(std::vector<CampaignRun>& runs) {
  const std::uint32_t count = runs.front().shard.count;
  std::map<std::uint32_t, CampaignRun*> by_index;
  for (CampaignRun& run : runs) {
    const auto [at, inserted] = by_index.emplace(run.shard.index, &run);
    if (!inserted)
      throw MergeError(fmt::format("field 'shard' is {}/{} in both {} and {}: a shard given twice", run.shard.index,
                                   count, at->second->path, run.path));
  }
  // Named up to ten: a count of 2^20 with two reports given would be a message of megabytes.
  constexpr std::size_t kNamed = 10;
  std::vector<std::uint32_t> missing;
  for (std::uint32_t i = 0; i < count && missing.size() < kNamed; ++i)
    if (!by_index.contains(i)) missing.push_back(i);
  const std::uint64_t missing_count = count - by_index.size();
  if (missing_count > 0)
    throw MergeError(fmt::format("field 'shard': shard{} {}{} of {} missing (given: {})", missing_count > 1 ? "s" : "",
                                 fmt::join(missing, ", "),
                                 missing_count > kNamed ? fmt::format(", ... ({} in all)", missing_count) : "",
                                 count, runs.size()));
  std::vector<CampaignRun*> ordered;
  for (const auto& [index, run] : by_index) ordered.push_back(run);
  return ordered;
}

// `sum` + `part`, refused beyond the largest count a report holds (2^53 - 1, the schema's bound:
// past it a count is no longer exact in every JSON reader), which also keeps the sum within 64
// bits: 2^64 - 1 and 1 wrapped to 0 failures, an "OK".
void add_count(std::uint64_t& sum, std::uint64_t part, std::string_view field) {
  if (part > kMaxReportCount - sum)
    throw MergeError(fmt::format("field '{}': the shards' sum {} + {} exceeds {}, the largest count a report holds",
                                 field, sum, part, kMaxReportCount));
  sum += part;
}

void add_cell(CellSummary& sum, const CellSummary& part, std::size_t index) {
  const auto field = [&](const char* name) { return fmt::format("results[{}].{}", index, name); };
  add_count(sum.cases, part.cases, field("cases"));
  add_count(sum.skipped, part.skipped, field("skipped"));
  add_count(sum.failures, part.failures, field("failures"));
  add_count(sum.violations, part.violations, field("violations"));
  add_count(sum.violations_kept, part.violations_kept, field("violations_kept"));
  for (std::size_t r = 0; r < kRuleCount; ++r)
    add_count(sum.violations_by_rule[r], part.violations_by_rule[r],
              field(fmt::format("violations_by_rule.{}", rule_name(static_cast<Rule>(r))).c_str()));
  std::uint64_t rows = sum.stats.rows, values = sum.stats.values;
  add_count(rows, part.stats.rows, field("rows"));
  add_count(values, part.stats.values, field("values"));
  sum.stats.merge(part.stats);
  sum.stats.rows = rows;
  sum.stats.values = values;
  sum.skip_reasons.insert(part.skip_reasons.begin(), part.skip_reasons.end());
  sum.seconds += part.seconds;
  if (sum.seconds > kMaxReportSeconds)
    throw MergeError(fmt::format("field '{}': the shards' sum exceeds {:g} s, the largest time a report holds",
                                 field("seconds"), kMaxReportSeconds));
  if (sum.first_failure.empty() && !part.first_failure.empty()) {
    sum.first_failure = part.first_failure;
    sum.first_violations = part.first_violations;
    sum.first_diagnoses = part.first_diagnoses;
  }
}

}  // namespace

MergedCampaign merge_campaigns(std::vector<CampaignRun> runs, MemoryBudget* budget) {
  if (runs.empty()) throw MergeError("nothing to merge");
  check_same_run(runs);
  const std::vector<CampaignRun*> ordered = in_shard_order(runs);

  MergedCampaign merged;
  merged.shards = runs.front().shard.count;
  for (const CellSummary& cell : ordered.front()->cells) merged.cells.emplace_back(cell.backend, cell.k);
  double elapsed_s = 0;
  nlohmann::json sources = nlohmann::json::array();
  for (CampaignRun* run : ordered) {
    for (std::size_t i = 0; i < run->cells.size(); ++i) add_cell(merged.cells[i], run->cells[i], i);
    for (CounterexampleFile& f : run->counterexamples) merged.counterexamples.push_back(std::move(f));  // not copied
    add_count(merged.hand_cases, run->hand_cases, "hand_cases");
    add_count(merged.random_cases, run->random_cases, "random_cases");
    elapsed_s = std::max(elapsed_s, run->elapsed_s);  // shards run side by side
    sources.push_back(run->path);
    if (run != ordered.front()) run->json = nullptr;  // read: only the first's tree is kept (as the merged one)
  }
  // What the merge holds beside the reports: the summed cells, and the merged report's JSON of
  // them and of every counterexample (moved out of the reports, not copied): its texts, and 80
  // bytes a value.
  if (budget) {
    std::uint64_t bytes = 0;
    for (const CellSummary& cell : merged.cells) bytes += 2 * held_bytes(cell) + 80 * 48;
    for (const CounterexampleFile& f : merged.counterexamples) bytes += held_bytes(f) + 80 * 16;
    budget->charge(bytes, fmt::format("the merge of {} reports: its {} results and {} counterexamples", runs.size(),
                                      merged.cells.size(), merged.counterexamples.size()));
  }

  // The whole run's report: the first shard's (moved, not copied), with every per-shard field
  // replaced.
  nlohmann::json& json = merged.json = std::move(runs[std::size_t(ordered.front() - runs.data())].json);
  nlohmann::json results = nlohmann::json::array();
  for (const CellSummary& cell : merged.cells) results.push_back(to_json(cell));
  json["results"] = std::move(results);
  json["ok"] = total_failures(merged.cells) == 0;
  json["hand_cases"] = merged.hand_cases;
  json["random_cases"] = merged.random_cases;
  json["elapsed_s"] = elapsed_s;
  json["shard"] = {{"index", 0}, {"count", 1}, {"source", fmt::format("merge of {} shards", merged.shards)}};
  json["merged_from"] = std::move(sources);
  json["counterexamples"] = nlohmann::json::array();
  for (const CounterexampleFile& f : merged.counterexamples) json["counterexamples"].push_back(to_json(f));
  return merged;
}

}  // namespace logprobs
