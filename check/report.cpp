#include "report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>

#ifndef LOGPROBS_VERSION
#define LOGPROBS_VERSION "unknown"
#endif

namespace logprobs {
namespace {

std::string format_error(double value) { return value == 0 ? "0" : fmt::format("{:.3g}", value); }

nlohmann::json to_json(const CellSummary& cell) {
  return {{"backend", cell.backend},
          {"levels", cell.levels},
          {"cases", cell.cases},
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
  fmt::print(os, "{:<{}}  {:>6}  {:>8}  {:>10}  {:>11}  {:>11}  {:>8}  {:>8}  {:>9}\n", "backend", name_width, "levels",
             "cases", "rows", "max abs err", "max ulp err", "tol used", "failures", "backend s");
  for (const CellSummary& c : cells)
    fmt::print(os, "{:<{}}  {:>6}  {:>8}  {:>10}  {:>11}  {:>11}  {:>8}  {:>8}  {:>9.3f}\n", c.backend, name_width,
               c.levels, c.cases, c.stats.rows, format_error(c.stats.max_abs_error),
               format_error(c.stats.max_ulp_error), format_error(c.stats.max_tolerance_used), c.failures, c.seconds);
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
          {"tolerance", {{"atol", tolerance.atol}, {"ulps", tolerance.ulps}, {"summation", tolerance.summation}}},
          {"backends", backends},
          {"command", command},
          {"results", results},
          {"ok", total_failures(cells) == 0}};
}

nlohmann::json to_json(const CounterexampleFile& file) {
  return {{"backend", file.backend},
          {"levels", file.levels},
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
  if (tolerance.atol != defaults.atol) flags += fmt::format(" --atol {}", tolerance.atol);
  if (tolerance.ulps != defaults.ulps) flags += fmt::format(" --ulps {}", tolerance.ulps);
  if (tolerance.summation != defaults.summation) flags += fmt::format(" --summation {}", tolerance.summation);
  return flags;
}

}  // namespace logprobs
