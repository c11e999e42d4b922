#include "merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

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

void check_same_run(std::span<const CampaignRun> runs) {
  const CampaignRun& first = runs.front();
  for (const CampaignRun& run : runs.subspan(1))
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
std::vector<const CampaignRun*> in_shard_order(std::span<const CampaignRun> runs) {
  const std::uint32_t count = runs.front().shard.count;
  std::map<std::uint32_t, const CampaignRun*> by_index;
  for (const CampaignRun& run : runs) {
    const auto [at, inserted] = by_index.emplace(run.shard.index, &run);
    if (!inserted)
      throw MergeError(fmt::format("field 'shard' is {}/{} in both {} and {}: a shard given twice", run.shard.index,
                                   count, at->second->path, run.path));
  }
  std::vector<std::uint32_t> missing;
  for (std::uint32_t i = 0; i < count; ++i)
    if (!by_index.contains(i)) missing.push_back(i);
  if (!missing.empty())
    throw MergeError(fmt::format("field 'shard': shard{} {} of {} missing (given: {})", missing.size() > 1 ? "s" : "",
                                 fmt::join(missing, ", "), count, runs.size()));
  std::vector<const CampaignRun*> ordered;
  for (const auto& [index, run] : by_index) ordered.push_back(run);
  return ordered;
}

void add_cell(CellSummary& sum, const CellSummary& part) {
  sum.cases += part.cases;
  sum.skipped += part.skipped;
  sum.skip_reasons.insert(part.skip_reasons.begin(), part.skip_reasons.end());
  sum.failures += part.failures;
  sum.stats.merge(part.stats);
  sum.seconds += part.seconds;
  if (sum.first_failure.empty() && !part.first_failure.empty()) {
    sum.first_failure = part.first_failure;
    sum.first_violations = part.first_violations;
  }
}

}  // namespace

MergedCampaign merge_campaigns(std::span<const CampaignRun> runs) {
  if (runs.empty()) throw MergeError("nothing to merge");
  check_same_run(runs);
  const std::vector<const CampaignRun*> ordered = in_shard_order(runs);

  MergedCampaign merged;
  merged.shards = runs.front().shard.count;
  for (const CellSummary& cell : ordered.front()->cells) merged.cells.emplace_back(cell.backend, cell.k);
  double elapsed_s = 0;
  nlohmann::json sources = nlohmann::json::array();
  for (const CampaignRun* run : ordered) {
    for (std::size_t i = 0; i < run->cells.size(); ++i) add_cell(merged.cells[i], run->cells[i]);
    merged.counterexamples.insert(merged.counterexamples.end(), run->counterexamples.begin(),
                                  run->counterexamples.end());
    merged.hand_cases += run->hand_cases;
    merged.random_cases += run->random_cases;
    elapsed_s = std::max(elapsed_s, run->elapsed_s);  // shards run side by side
    sources.push_back(run->path);
  }

  // The whole run's report: the first shard's, with every per-shard field replaced.
  nlohmann::json& json = merged.json = ordered.front()->json;
  nlohmann::json results = nlohmann::json::array();
  for (const CellSummary& cell : merged.cells) results.push_back(to_json(cell));
  json["results"] = results;
  json["ok"] = total_failures(merged.cells) == 0;
  json["hand_cases"] = merged.hand_cases;
  json["random_cases"] = merged.random_cases;
  json["elapsed_s"] = elapsed_s;
  json["shard"] = {{"index", 0}, {"count", 1}, {"source", fmt::format("merge of {} shards", merged.shards)}};
  json["merged_from"] = sources;
  json["counterexamples"] = nlohmann::json::array();
  for (const CounterexampleFile& f : merged.counterexamples) json["counterexamples"].push_back(to_json(f));
  return merged;
}

}  // namespace logprobs
