#include "commands.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>

#include "harness/batch_file.hpp"

namespace logprobs::cli {
namespace {

// The backends' names, joined by `separator`.
template <typename Backends>
std::string names_of(const Backends& backends, std::string_view separator) {
  std::vector<std::string_view> names;
  for (const Backend* b : backends) names.push_back(b->name());
  return fmt::format("{}", fmt::join(names, separator));
}

const Backend& available_backend(const std::string& name) {
  const Backend* backend = find_backend(name);
  if (backend == nullptr)
    throw UsageError(fmt::format("unknown backend '{}' (known: {})", name, names_of(all_backends(), ", ")));
  const Availability a = backend->availability();
  if (!a.available) throw UsageError(fmt::format("backend '{}' is not available here: {}", name, a.reason));
  return *backend;
}

// The named backends, or every available one but the reference (the judge) when none is named.
std::vector<const Backend*> backends_under_test(const std::vector<std::string>& names) {
  std::vector<const Backend*> chosen;
  if (!names.empty()) {
    for (const std::string& name : names) chosen.push_back(&available_backend(name));
    return chosen;
  }
  for (const Backend* b : all_backends())
    if (b->name() != kReferenceName && b->availability().available) chosen.push_back(b);
  return chosen;
}

// --k or --levels, else the batch file's metadata, else (for verify) the result file's metadata
// or its shape.
std::uint32_t k_for(const FileArgs& args, const BatchFile& file, const ResultFile* result = nullptr) {
  if (const std::optional<std::uint32_t> k = args.k.chosen()) return *k;
  if (file.k) return *file.k;
  if (result != nullptr) {
    if (result->k) return *result->k;
    if (result->layout == ResultLayout::split) return static_cast<std::uint32_t>(result->split.k);
    if (result->packed.width > 0 && result->packed.width - 1 <= kMaxK)
      return static_cast<std::uint32_t>(result->packed.width - 1);
  }
  throw UsageError(
      fmt::format("neither --k nor --levels given, and {} has no \"k\" or \"levels\" in its metadata", args.input));
}

void write_json(const std::string& path, const nlohmann::json& json) {
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << '\n';
  out.close();
  if (!out) throw UsageError(fmt::format("cannot write JSON to {}", path));
}

void print_violations(const std::string& label, const BackendOutcome& outcome, std::size_t max_violations) {
  if (!outcome.skipped.empty())
    fmt::print("{}skipped: the batch needs {}, which it does not implement (SPEC §4)\n", label, outcome.skipped);
  if (!outcome.error.empty()) fmt::print("{}threw: {}\n", label, outcome.error);
  if (!outcome.canonical_difference.empty()) fmt::print("{}{}\n", label, outcome.canonical_difference);
  const auto& violations = outcome.verdict.violations;
  for (std::size_t i = 0; i < violations.size() && i < max_violations; ++i)
    fmt::print("{}{}\n", label, violations[i].message());
  if (violations.size() > max_violations)
    fmt::print("{}... and {} more violations\n", label, violations.size() - max_violations);
}

// The table, the verdict line and (when asked) the JSON report of `compare` and `verify`.
int report_cells(const std::vector<CellSummary>& cells, const char* command, const FileArgs& args) {
  print_table(std::cout, cells);
  const std::uint64_t failures = total_failures(cells);
  fmt::print("{}\n", failures == 0 ? "OK: every result agrees with the reference"
                                   : fmt::format("FAIL: {} of {} results disagree", failures, cells.size()));
  if (!args.json.empty()) {
    nlohmann::json json = report_json(command, args.tolerance, cells);
    json["input"] = args.input;
    if (!args.result.empty()) json["result"] = args.result;
    json["k"] = cells.empty() ? nlohmann::json(nullptr) : nlohmann::json(cells.front().k);
    write_json(args.json, json);
  }
  return failures == 0 ? kAgree : kDisagree;
}

}  // namespace

std::optional<std::uint32_t> KArgs::chosen() const {
  if (k && levels) throw UsageError("give --k or --levels, not both");
  if (levels) return top_k(*levels);
  return k;
}

int campaign_command(const CampaignArgs& args) {
  if (!args.ks.empty() && !args.levels.empty()) throw UsageError("give --k or --levels, not both");
  CampaignOptions options;
  options.backends = backends_under_test(args.backends);
  if (!args.ks.empty()) options.ks = args.ks;
  if (!args.levels.empty()) {
    options.ks.clear();
    for (int levels : args.levels) options.ks.push_back(top_k(levels));
  }
  options.time_budget_s = args.time_s;
  if (args.cases > 0) options.max_cases = args.cases;
  options.seed = args.seed ? *args.seed : (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}());
  options.tolerance = args.tolerance;
  options.counterexample_dir = args.out_dir;
  options.program = args.program;
  options.progress = ::isatty(::fileno(stderr)) != 0;

  fmt::print("logprobs-check campaign: backends {} against the reference; K {}; seed {}; time {:g} s{}\n",
             options.backends.empty() ? "(none)" : names_of(options.backends, ","), fmt::join(options.ks, ","),
             options.seed, options.time_budget_s,
             options.max_cases ? fmt::format(", at most {} random cases", *options.max_cases) : "");
  std::fflush(stdout);
  const CampaignReport report = run_campaign(options, std::cout);

  fmt::print("\n{} hand cases and {} random cases in {:.1f} s\n", report.hand_cases, report.random_cases,
             report.elapsed_s);
  print_table(std::cout, report.cells);
  const std::uint64_t failures = total_failures(report.cells);
  fmt::print("{}\n", failures == 0 ? "OK: every backend agrees with the reference"
                                   : fmt::format("FAIL: {} failing (backend, K, case) triples", failures));

  if (!args.json.empty()) {
    nlohmann::json json = report_json("campaign", options.tolerance, report.cells);
    json["seed"] = options.seed;
    json["time_budget_s"] = options.time_budget_s;
    json["max_cases"] = options.max_cases ? nlohmann::json(*options.max_cases) : nlohmann::json(nullptr);
    json["elapsed_s"] = report.elapsed_s;
    json["hand_cases"] = report.hand_cases;
    json["random_cases"] = report.random_cases;
    json["k"] = options.ks;
    json["counterexamples"] = nlohmann::json::array();
    for (const CounterexampleFile& f : report.counterexamples) json["counterexamples"].push_back(to_json(f));
    write_json(args.json, json);
  }
  return failures == 0 ? kAgree : kDisagree;
}

int run_command(const FileArgs& args) {
  const Backend& backend = available_backend(args.backend);
  const BatchFile file = read_batch_file(args.input);
  const std::uint32_t k = k_for(args, file);
  const ResultData result = run_backend(backend, file.batch, k, args.ranks);
  write_result_file(args.output, result, {{"k", std::to_string(k)}, {"backend", args.backend}});
  fmt::print("{}: {} rows x {} slots{} from backend {} at K = {}\n", args.output, result.rows, result.width,
             result.ranks ? " and ranks" : "", args.backend, k);
  return kAgree;
}

int verify_command(const FileArgs& args) {
  const BatchFile file = read_batch_file(args.input);
  const ResultFile got = read_result_file(args.result);
  const std::uint32_t k = k_for(args, file, &got);
  BackendOutcome outcome;
  outcome.verdict = judge_against_reference(file.batch, k, got.as_packed(file.batch.view()), args.tolerance);
  print_violations("", outcome, args.max_violations);
  // The row names what produced the result: `run` records its backend in the metadata.
  const auto producer = got.metadata.find("backend");
  std::vector<CellSummary> cells;
  cells.emplace_back(producer == got.metadata.end() ? args.result : producer->second, k);
  cells.back().add(outcome);
  fmt::print("{}: B = {}, V = {}, {} output rows\n", args.result, file.batch.sampled_tokens.size(), file.batch.vocab,
             file.batch.view().output_rows());
  return report_cells(cells, "verify", args);
}

int compare_command(const FileArgs& args) {
  const BatchFile file = read_batch_file(args.input);
  const std::uint32_t k = k_for(args, file);
  const std::vector<const Backend*> backends = backends_under_test(args.backends);
  const ResultData reference = run_backend(reference_backend(), file.batch, k);
  const std::optional<ResultData> canonical = canonical_result(backends, file.batch, k, args.ranks);

  std::vector<CellSummary> cells;
  for (const Backend* backend : backends) {
    // A backend named on the command line is held to the request: lacking a part is an error.
    const std::string lacking = missing_part(backend->features(), file.batch.view(), k, args.ranks);
    if (!args.backends.empty() && !lacking.empty())
      throw UnsupportedPart(
          fmt::format("backend {} does not implement {}, which {} needs", backend->name(), lacking, args.input));
    const BackendOutcome outcome = judge_backend(*backend, file.batch, k, args.ranks, reference, args.tolerance,
                                                 canonical ? &*canonical : nullptr);
    print_violations(fmt::format("{}: ", backend->name()), outcome, args.max_violations);
    cells.emplace_back(std::string(backend->name()), k);
    cells.back().add(outcome);
  }
  fmt::print("{}: B = {}, V = {}, {} output rows\n", args.input, file.batch.sampled_tokens.size(), file.batch.vocab,
             file.batch.view().output_rows());
  return report_cells(cells, "compare", args);
}

int backends_command() {
  std::size_t width = 0;
  for (const Backend* b : all_backends()) width = std::max(width, b->name().size());
  for (const Backend* b : all_backends()) {
    const Availability a = b->availability();
    fmt::print("{:<{}}  {:<11}  {}\n", b->name(), width, a.available ? "available" : "unavailable", b->description());
    if (!a.available) fmt::print("{:<{}}  {:<11}  why: {}\n", "", width, "", a.reason);
  }
  return kAgree;
}

}  // namespace logprobs::cli
