#include "campaign_file.hpp"

#include <fmt/format.h>

#include <cmath>

#include "harness/bounded_json.hpp"
#include "harness/readable_file.hpp"

namespace logprobs {
namespace {

// The field `name` of `json`, or a CampaignFileError naming it.
const nlohmann::json& field(const nlohmann::json& json, const char* name, const std::string& path) {
  const auto found = json.find(name);
  if (found == json.end())
    throw CampaignFileError(
        fmt::format("{}: field '{}' is missing (not a campaign report of this version)", path, name));
  return *found;
}

template <typename T>
T field_as(const nlohmann::json& json, const char* name, const std::string& path) {
  try {
    return field(json, name, path).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw CampaignFileError(fmt::format("{}: field '{}' is malformed: {}", path, name, e.what()));
  }
}

}  // namespace

nlohmann::json campaign_json(const CampaignOptions& options, const CampaignReport& report) {
  nlohmann::json json = report_json("campaign", options.tolerance, report.cells);
  json["seed"] = options.seed;
  json["time_budget_s"] = std::isfinite(options.time_budget_s) ? nlohmann::json(options.time_budget_s) : nullptr;
  json["max_cases"] = options.max_cases ? nlohmann::json(*options.max_cases) : nlohmann::json(nullptr);
  json["elapsed_s"] = report.elapsed_s;
  json["hand_cases"] = report.hand_cases;
  json["random_cases"] = report.random_cases;
  json["complete"] = options.max_cases.has_value() && !report.stopped_by_time;
  json["k"] = options.ks;
  nlohmann::json under_test = nlohmann::json::array();
  for (const Backend* b : options.backends) under_test.push_back(b->name());
  json["backends_under_test"] = under_test;
  json["shard"] = {{"index", options.shard.index}, {"count", options.shard.count}, {"source", options.shard.source}};
  json["counterexamples"] = nlohmann::json::array();
  for (const CounterexampleFile& f : report.counterexamples) json["counterexamples"].push_back(to_json(f));
  return json;
}

CampaignRun read_campaign_file(const std::string& path, MemoryBudget* budget) {
  // A regular file only (a FIFO hung std::ifstream), its JSON bounded: a report of nested
  // brackets took 3.8 GB.
  const std::string text = read_whole_file(path, budget);
  CampaignRun run;
  run.path = path;
  try {
    run.json = parse_bounded_json(text, budget, path, [&](const std::string& reason) {
      throw CampaignFileError(fmt::format("{} is not a campaign report: its JSON {}", path, reason));
    });
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number beyond double
    throw CampaignFileError(fmt::format("{} is not a campaign report: not JSON ({})", path, e.what()));
  }
  if (!run.json.is_object() || run.json.value("tool", "") != "logprobs-check")
    throw CampaignFileError(fmt::format("{} is not a campaign report: field 'tool' is not \"logprobs-check\"", path));
  if (run.json.value("command", "") != "campaign")
    throw CampaignFileError(fmt::format("{} is not a campaign report: field 'command' is {}, not \"campaign\"", path,
                                        run.json.contains("command") ? run.json["command"].dump() : "missing"));
  const nlohmann::json& shard = field(run.json, "shard", path);
  run.shard.index = field_as<std::uint32_t>(shard, "index", path);
  run.shard.count = field_as<std::uint32_t>(shard, "count", path);
  run.shard.source = shard.value("source", "");
  if (run.shard.count == 0 || run.shard.index >= run.shard.count)
    throw CampaignFileError(fmt::format("{}: field 'shard' is {}/{}", path, run.shard.index, run.shard.count));
  run.hand_cases = field_as<std::uint64_t>(run.json, "hand_cases", path);
  run.random_cases = field_as<std::uint64_t>(run.json, "random_cases", path);
  run.complete = field_as<bool>(run.json, "complete", path);
  run.elapsed_s = field_as<double>(run.json, "elapsed_s", path);
  try {
    for (const nlohmann::json& cell : field(run.json, "results", path)) run.cells.push_back(cell_from_json(cell));
    for (const nlohmann::json& file : field(run.json, "counterexamples", path))
      run.counterexamples.push_back(counterexample_from_json(file));
  } catch (const nlohmann::json::exception& e) {
    throw CampaignFileError(fmt::format("{}: field 'results' or 'counterexamples' is malformed: {}", path, e.what()));
  }
  return run;
}

}  // namespace logprobs
