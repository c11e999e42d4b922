#include "report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#ifndef LOGPROBS_VERSION
#define LOGPROBS_VERSION "unknown"
#endif

namespace logprobs {
namespace {

std::string format_error(double value) { return value == 0 ? "0" : fmt::format("{:.3g}", value); }

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
          {"max_tolerance_used", cell.stats.max_tolerance_used},
          {"failures", cell.failures},
          {"seconds", cell.seconds}};
}

}  // namespace

void CellSummary::add(const BackendOutcome& outcome) {
  if (!outcome.skipped.empty()) {
    ++skipped;
    skip_reasons.insert(outcome.skipped);
    return;
  }
  ++cases;
  if (!outcome.ok()) ++failures;
  stats.merge(outcome.verdict.stats);
  seconds += outcome.seconds;
}

std::uint64_t total_failures(std::span<const CellSummary> cells) {
  std::uint64_t total = 0;
  for (const CellSummary& c : cells) total += c.failures;
  return total;
}

void print_table(std::ostream& os, std::span<const CellSummary> cells) {
  std::size_t name_width = 7;
  for (const CellSummary& c : cells) name_width = std::max(name_width, c.backend.size());
  fmt::print(os, "{:<{}}  {:>5}  {:>8}  {:>7}  {:>10}  {:>11}  {:>11}  {:>8}  {:>8}  {:>9}\n", "backend", name_width,
             "K", "cases", "skipped", "rows", "max abs err", "max ulp err", "tol used", "failures", "backend s");
  for (const CellSummary& c : cells)
    fmt::print(os, "{:<{}}  {:>5}  {:>8}  {:>7}  {:>10}  {:>11}  {:>11}  {:>8}  {:>8}  {:>9.3f}\n", c.backend,
               name_width, c.k, c.cases, c.skipped, c.stats.rows, format_error(c.stats.max_abs_error),
               format_error(c.stats.max_ulp_error), format_error(c.stats.max_tolerance_used), c.failures, c.seconds);
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
          {"tolerance",
           {{"ulps", tolerance.ulps},
            {"norm_ulps", tolerance.norm_ulps},
            {"sigma", tolerance.sigma},
            {"linear_sum", tolerance.linear_sum}}},
          {"backends", backends},
          {"command", command},
          {"results", results},
          {"ok", total_failures(cells) == 0}};
}

nlohmann::json to_json(const CounterexampleFile& file) {
  return {{"backend", file.backend},
          {"k", file.k},
          {"ranks", file.ranks},
          {"origin", file.origin},
          {"file", file.path.string()},
          {"replay", file.replay_command},
          {"shrink_steps", file.shrink_steps},
          {"violations", file.first_violations},
          {"reproduces", file.reproduces}};
}

std::string tolerance_flags(const Tolerance& tolerance) {
  const Tolerance defaults;
  std::string flags;
  // fmt's {} prints the shortest text that parses back to the same double.
  if (tolerance.ulps != defaults.ulps) flags += fmt::format(" --ulps {}", tolerance.ulps);
  if (tolerance.norm_ulps != defaults.norm_ulps) flags += fmt::format(" --norm-ulps {}", tolerance.norm_ulps);
  if (tolerance.sigma != defaults.sigma) flags += fmt::format(" --sigma {}", tolerance.sigma);
  if (tolerance.linear_sum) flags += " --linear-sum";
  return flags;
}

}  // namespace logprobs
