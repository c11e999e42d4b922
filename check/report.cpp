#include "report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "build_info.hpp"  // generated at every build: LOGPROBS_GIT_COMMIT

#ifndef LOGPROBS_VERSION
#define LOGPROBS_VERSION "unknown"
#endif
#ifndef LOGPROBS_BUILD_TYPE
#define LOGPROBS_BUILD_TYPE "unknown"
#endif

namespace logprobs {
namespace {

std::string format_error(double value) { return value == 0 ? "0" : fmt::format("{:.3g}", value); }

nlohmann::json to_json(const RowLocation& at) {
  return {{"batch", at.batch},
          {"output_row", at.output_row},
          {"kind", at.shape.kind()},
          {"vocab", at.shape.vocab},
          {"top_probability", at.shape.top_probability},
          {"finite_range", at.shape.finite_range},
          {"masked", at.shape.masked},
          {"sum_rule", sum_rule_name(at.tolerance.sum_rule)},
          {"dev", at.tolerance.dev},
          {"sum_err", at.tolerance.sum_err}};
}

SumRule sum_rule_of(const nlohmann::json& name) {
  const std::optional<SumRule> rule = sum_rule_from_name(name.get<std::string>());
  if (!rule) throw nlohmann::json::other_error::create(501, "unknown sum rule " + name.dump(), &name);
  return *rule;
}

RowLocation row_location_from_json(const nlohmann::json& json) {
  RowLocation at;
  at.batch = json.at("batch").get<std::uint64_t>();
  at.output_row = json.at("output_row").get<std::uint64_t>();
  at.shape.vocab = json.at("vocab").get<std::uint64_t>();
  at.shape.top_probability = json.at("top_probability").get<double>();
  at.shape.finite_range = json.at("finite_range").get<double>();
  at.shape.masked = json.at("masked").get<std::uint64_t>();
  at.tolerance.sum_rule = sum_rule_of(json.at("sum_rule"));
  at.tolerance.dev = json.at("dev").get<double>();
  at.tolerance.sum_err = json.at("sum_err").get<double>();
  return at;
}

// A nonzero error against a tolerance of zero (--ulps 0 --norm-ulps 0 --sigma 0) used an infinite
// share of it; JSON has no infinity (nlohmann writes null, which merge then could not read), so
// it is the string "inf", as the schema says.
nlohmann::json tolerance_used_json(double share) {
  return std::isinf(share) ? nlohmann::json("inf") : nlohmann::json(share);
}

}  // namespace

nlohmann::json tolerance_json(const Tolerance& tolerance) {
  return {{"ulps", tolerance.ulps},
          {"norm_ulps", tolerance.norm_ulps},
          {"sum_rule", sum_rule_name(tolerance.sum_rule)},
          {"sigma", tolerance.sigma},
          {"floor", tolerance.floor}};
}

Tolerance tolerance_from_json(const nlohmann::json& json) {
  return {.ulps = json.at("ulps").get<double>(),
          .norm_ulps = json.at("norm_ulps").get<double>(),
          .sum_rule = sum_rule_of(json.at("sum_rule")),
          .sigma = json.at("sigma").get<double>(),
          .floor = json.at("floor").get<double>()};
}

// The rules broken, each with its count (those never broken left out).
nlohmann::json by_rule_json(const std::array<std::uint64_t, kRuleCount>& counts) {
  nlohmann::json json = nlohmann::json::object();
  for (std::size_t r = 0; r < kRuleCount; ++r)
    if (counts[r] > 0) json[rule_name(static_cast<Rule>(r))] = counts[r];
  return json;
}

nlohmann::json to_json(const CellSummary& cell) {
  return {{"backend", cell.backend},
          {"k", cell.k},
          {"cases", cell.cases},
          {"skipped", cell.skipped},
          {"skip_reasons", cell.skip_reasons},
          {"rows", cell.stats.rows},
          {"values", cell.stats.values},
          {"max_abs_error", cell.stats.max_abs_error},
          {"max_ulp_error", cell.stats.max_ulp_error},
          {"max_tolerance_used", tolerance_used_json(cell.stats.max_tolerance_used)},
          {"max_tolerance_row",
           cell.stats.max_tolerance_row ? to_json(*cell.stats.max_tolerance_row) : nlohmann::json(nullptr)},
          {"failures", cell.failures},
          {"violations", cell.violations},
          {"violations_kept", cell.violations_kept},
          {"violations_by_rule", by_rule_json(cell.violations_by_rule)},
          {"seconds", cell.seconds},
          {"first_failure", cell.first_failure},
          {"first_violations", cell.first_violations},
          {"diagnoses", diagnoses_json(cell.first_diagnoses)}};
}

CellSummary cell_from_json(const nlohmann::json& json) {
  CellSummary cell(json.at("backend").get<std::string>(), json.at("k").get<std::uint32_t>());
  cell.cases = json.at("cases").get<std::uint64_t>();
  cell.skipped = json.at("skipped").get<std::uint64_t>();
  cell.skip_reasons = json.at("skip_reasons").get<std::set<std::string>>();
  cell.stats.rows = json.at("rows").get<std::uint64_t>();
  cell.stats.values = json.at("values").get<std::uint64_t>();
  cell.stats.max_abs_error = json.at("max_abs_error").get<double>();
  cell.stats.max_ulp_error = json.at("max_ulp_error").get<double>();
  const nlohmann::json& used = json.at("max_tolerance_used");
  cell.stats.max_tolerance_used = used == "inf" ? std::numeric_limits<double>::infinity() : used.get<double>();
  if (const nlohmann::json& at = json.at("max_tolerance_row"); !at.is_null())
    cell.stats.max_tolerance_row = row_location_from_json(at);
  cell.failures = json.at("failures").get<std::uint64_t>();
  cell.violations = json.at("violations").get<std::uint64_t>();
  cell.violations_kept = json.at("violations_kept").get<std::uint64_t>();
  for (const auto& [name, count] : json.at("violations_by_rule").items()) {
    const std::optional<Rule> rule = rule_from_name(name);
    if (!rule) throw nlohmann::json::other_error::create(501, "unknown rule '" + name + "'", &json);
    cell.violations_by_rule[static_cast<std::size_t>(*rule)] = count.get<std::uint64_t>();
  }
  cell.seconds = json.at("seconds").get<double>();
  cell.first_failure = json.value("first_failure", std::string());
  cell.first_violations = json.value("first_violations", std::vector<std::string>());
  // Reports written before the diagnosis have none.
  if (const auto found = json.find("diagnoses"); found != json.end()) cell.first_diagnoses = diagnoses_from_json(*found);
  return cell;
}

void CellSummary::add(const BackendOutcome& outcome) {
  if (!outcome.skipped.empty()) {
    ++skipped;
    skip_reasons.insert(outcome.skipped);
    return;
  }
  ++cases;
  if (!outcome.ok()) ++failures;
  violations += outcome.verdict.violation_count;
  violations_kept += outcome.verdict.violations.size();
  for (std::size_t r = 0; r < kRuleCount; ++r) violations_by_rule[r] += outcome.verdict.rule_counts[r];
  stats.merge(outcome.verdict.stats);
  seconds += outcome.seconds;
}

void CellSummary::note_failure(const std::string& origin, const BackendOutcome& outcome) {
  if (!first_failure.empty()) return;
  first_failure = origin;
  if (!outcome.error.empty()) first_violations.push_back("threw: " + outcome.error);
  if (!outcome.canonical_difference.empty()) first_violations.push_back(outcome.canonical_difference);
  for (std::size_t i = 0; i < outcome.verdict.violations.size() && first_violations.size() < kFirstViolations; ++i)
    first_violations.push_back(outcome.verdict.violations[i].message());
  first_diagnoses = outcome.diagnoses;
}

nlohmann::json diagnoses_json(std::span<const Diagnosis> diagnoses) {
  nlohmann::json list = nlohmann::json::array();
  for (const Diagnosis& d : diagnoses) list.push_back({{"name", d.name()}, {"rows", d.rows}, {"evidence", d.evidence}});
  return list;
}

std::vector<Diagnosis> diagnoses_from_json(const nlohmann::json& json) {
  std::vector<Diagnosis> diagnoses;
  for (const nlohmann::json& d : json) {
    const nlohmann::json& name = d.at("name");
    const std::optional<BugClass> bug = bug_class_from_name(name.get<std::string>());
    if (!bug) throw nlohmann::json::other_error::create(501, "unknown diagnosis " + name.dump(), &name);
    diagnoses.push_back({*bug, d.at("rows").get<std::vector<std::uint64_t>>(), d.at("evidence").get<std::string>()});
  }
  return diagnoses;
}

std::vector<std::string> diagnosis_lines(std::span<const Diagnosis> diagnoses) {
  std::vector<std::string> lines;
  for (const Diagnosis& d : diagnoses) lines.push_back("diagnosis: " + d.message());
  return lines;
}

std::uint64_t total_failures(std::span<const CellSummary> cells) {
  std::uint64_t total = 0;
  for (const CellSummary& c : cells) total += c.failures;
  return total;
}

void print_table(std::ostream& os, std::span<const CellSummary> cells) {
  std::size_t name_width = 7;
  for (const CellSummary& c : cells) name_width = std::max(name_width, c.backend.size());
  fmt::print(os, "{:<{}}  {:>5}  {:>8}  {:>7}  {:>10}  {:>11}  {:>11}  {:>8}  {:<9}  {:>8}  {:>9}\n", "backend",
             name_width, "K", "cases", "skipped", "rows", "max abs err", "max ulp err", "tol used", "on a row", "failures",
             "backend s");
  for (const CellSummary& c : cells)
    fmt::print(os, "{:<{}}  {:>5}  {:>8}  {:>7}  {:>10}  {:>11}  {:>11}  {:>8}  {:<9}  {:>8}  {:>9.3f}\n", c.backend,
               name_width, c.k, c.cases, c.skipped, c.stats.rows, format_error(c.stats.max_abs_error),
               format_error(c.stats.max_ulp_error), format_error(c.stats.max_tolerance_used),
               c.stats.max_tolerance_row ? c.stats.max_tolerance_row->shape.kind() : "-", c.failures, c.seconds);
  // What each backend skipped, once per backend (the same parts recur at every K).
  std::map<std::string, std::set<std::string>> reasons;
  for (const CellSummary& c : cells) reasons[c.backend].insert(c.skip_reasons.begin(), c.skip_reasons.end());
  for (const auto& [backend, parts] : reasons)
    if (!parts.empty())
      fmt::print(os, "{} skipped the cases that need {} (optional parts it does not implement, SPEC §4)\n", backend,
                 fmt::join(parts, ", "));
}

nlohmann::json report_json(std::string_view command, const Tolerance& tolerance, std::span<const CellSummary> cells) {
  nlohmann::json backends = nlohmann::json::array();
  for (const Backend* b : all_backends()) {
    const Availability a = b->availability();
    backends.push_back(
        {{"name", b->name()}, {"description", b->description()}, {"available", a.available}, {"reason", a.reason}});
  }
  nlohmann::json results = nlohmann::json::array();
  for (const CellSummary& c : cells) results.push_back(to_json(c));
  return {{"tool", "logprobs-check"},
          {"version", LOGPROBS_VERSION},
          {"contract_version", kContractVersion},
          {"build", build_json()},
          {"tolerance", tolerance_json(tolerance)},
          {"backends", backends},
          {"command", command},
          {"results", results},
          {"ok", total_failures(cells) == 0}};
}

nlohmann::json build_json() {
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("gcc ") + __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  return {{"version", LOGPROBS_VERSION},
          {"commit", LOGPROBS_GIT_COMMIT},
          {"compiler", compiler},
          {"build_type", LOGPROBS_BUILD_TYPE}};
}

CounterexampleFile counterexample_from_json(const nlohmann::json& json) {
  CounterexampleFile file;
  file.backend = json.at("backend").get<std::string>();
  file.k = json.at("k").get<std::uint32_t>();
  file.ranks = json.at("ranks").get<bool>();
  file.origin = json.at("origin").get<std::string>();
  file.path = json.at("file").get<std::string>();
  file.replay_command = json.at("replay").get<std::string>();
  file.shrink_steps = json.at("shrink_steps").get<int>();
  file.first_violations = json.at("violations").get<std::vector<std::string>>();
  file.reproduces = json.at("reproduces").get<bool>();
  file.write_error = json.value("write_error", std::string());
  if (const auto found = json.find("diagnoses"); found != json.end()) file.diagnoses = diagnoses_from_json(*found);
  return file;
}

nlohmann::json to_json(const CounterexampleFile& file) {
  nlohmann::json json = {{"backend", file.backend},
                         {"k", file.k},
                         {"ranks", file.ranks},
                         {"origin", file.origin},
                         {"file", file.path.string()},
                         {"replay", file.replay_command},
                         {"shrink_steps", file.shrink_steps},
                         {"violations", file.first_violations},
                         {"reproduces", file.reproduces},
                         {"diagnoses", diagnoses_json(file.diagnoses)}};
  if (!file.write_error.empty()) json["write_error"] = file.write_error;
  return json;
}

std::string tolerance_flags(const Tolerance& tolerance) {
  const Tolerance defaults;
  std::string flags;
  // fmt's {} prints the shortest text that parses back to the same double.
  if (tolerance.ulps != defaults.ulps) flags += fmt::format(" --ulps {}", tolerance.ulps);
  if (tolerance.norm_ulps != defaults.norm_ulps) flags += fmt::format(" --norm-ulps {}", tolerance.norm_ulps);
  if (tolerance.sum_rule != defaults.sum_rule) flags += fmt::format(" --sum-rule {}", sum_rule_name(tolerance.sum_rule));
  if (tolerance.sigma != defaults.sigma) flags += fmt::format(" --sigma {}", tolerance.sigma);
  if (tolerance.floor != defaults.floor) flags += fmt::format(" --floor {}", tolerance.floor);
  return flags;
}

std::string shell_word(std::string_view word) {
  const auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || (c != '\0' && std::strchr("@%+=:,./_-", c) != nullptr);
  };
  if (!word.empty() && std::all_of(word.begin(), word.end(), plain)) return std::string(word);
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace logprobs
