#include "campaign_file.hpp"

#include <fmt/format.h>

#include <cmath>

#include "harness/bounded_json.hpp"
#include "harness/readable_file.hpp"
#include "report_schema.hpp"

namespace logprobs {
namespace {

std::uint64_t text_bytes(const std::vector<std::string>& texts) {
  std::uint64_t bytes = 0;
  for (const std::string& t : texts) bytes += sizeof(std::string) + t.size();
  return bytes;
}

std::uint64_t diagnosis_bytes(const std::vector<Diagnosis>& diagnoses) {
  std::uint64_t bytes = 0;
  for (const Diagnosis& d : diagnoses) bytes += sizeof(Diagnosis) + d.rows.size() * 8 + d.evidence.size();
  return bytes;
}

}  // namespace

std::uint64_t held_bytes(const CellSummary& cell) {
  std::uint64_t bytes = sizeof(CellSummary) + cell.backend.size() + cell.first_failure.size() +
                        text_bytes(cell.first_violations) + diagnosis_bytes(cell.first_diagnoses);
  for (const std::string& reason : cell.skip_reasons) bytes += 64 + reason.size();  // a set's node
  return bytes;
}

std::uint64_t held_bytes(const CounterexampleFile& file) {
  return sizeof(CounterexampleFile) + file.backend.size() + file.origin.size() + file.path.native().size() +
         file.replay_command.size() + file.write_error.size() + text_bytes(file.first_violations) +
         diagnosis_bytes(file.diagnoses);
}

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
  // A regular file only (a FIFO hung std::ifstream).
  return parse_campaign_report(read_whole_file(path, budget), path, budget);
}

CampaignRun parse_campaign_report(std::string text, const std::string& path, MemoryBudget* budget) {
  // Its JSON bounded: a report of nested brackets took 3.8 GB.
  CampaignRun run;
  run.path = path;
  try {
    run.json = parse_bounded_json(text, budget, path, [&](const std::string& reason) {
      throw CampaignFileError(fmt::format("{} is not a campaign report: its JSON {}", path, reason));
    });
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number beyond double
    throw CampaignFileError(fmt::format("{} is not a campaign report: not JSON ({})", path, e.what()));
  }
  std::string().swap(text);  // the tree holds it now
  // What the file is, said plainly, before the schema's verdict on what it holds.
  if (!run.json.is_object() || run.json.value("tool", "") != "logprobs-check")
    throw CampaignFileError(fmt::format("{} is not a campaign report: field 'tool' is not \"logprobs-check\"", path));
  if (run.json.value("command", "") != "campaign")
    throw CampaignFileError(fmt::format("{} is not a campaign report: field 'command' is {}, not \"campaign\"", path,
                                        run.json.contains("command") ? run.json["command"].dump() : "missing"));
  // Every field present and of its type and bounds before any is read: a report without a seed
  // was a use-after-free, a count of 2^64 - 1 wrapped the sum of failures to 0.
  if (const std::string violation = schema_violation(run.json, ReportSchema::campaign); !violation.empty())
    throw CampaignFileError(fmt::format("{}: {} (docs/schemas/campaign-report.schema.json)", path, violation));
  const nlohmann::json& json = run.json;
  run.shard = {json.at("shard").at("index").get<std::uint32_t>(), json.at("shard").at("count").get<std::uint32_t>(),
               json.at("shard").at("source").get<std::string>()};
  if (run.shard.index >= run.shard.count)
    throw CampaignFileError(fmt::format("{}: field 'shard' is {}/{}: the index is not below the count", path,
                                        run.shard.index, run.shard.count));
  run.hand_cases = json.at("hand_cases").get<std::uint64_t>();
  run.random_cases = json.at("random_cases").get<std::uint64_t>();
  run.complete = json.at("complete").get<bool>();
  run.elapsed_s = json.at("elapsed_s").get<double>();
  // Each item charged before it is kept: a report of 40 MiB of counterexamples stops at the one
  // that does not fit.
  const auto keep = [&](auto& kept, auto item, const char* field) {
    if (budget) budget->charge(held_bytes(item), fmt::format("{}: its {}, as read", path, field));
    kept.push_back(std::move(item));
  };
  run.cells.reserve(json.at("results").size());
  for (const nlohmann::json& cell : json.at("results")) keep(run.cells, cell_from_json(cell), "results");
  run.counterexamples.reserve(json.at("counterexamples").size());
  for (const nlohmann::json& file : json.at("counterexamples"))
    keep(run.counterexamples, counterexample_from_json(file), "counterexamples");
  return run;
}

}  // namespace logprobs
