#include "commands.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <set>

#include "campaign_file.hpp"
#include "file_k.hpp"
#include "harness/batch_file.hpp"
#include "harness/bounded_json.hpp"
#include "junit.hpp"
#include "merge.hpp"
#include "output_file.hpp"
#include "output_paths.hpp"

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
    std::set<std::string> seen;
    for (const std::string& name : names) {
      if (!seen.insert(name).second) throw UsageError(fmt::format("--backends names '{}' twice", name));
      chosen.push_back(&available_backend(name));
    }
    return chosen;
  }
  for (const Backend* b : all_backends())
    if (b->name() != kReferenceName && b->availability().available) chosen.push_back(b);
  return chosen;
}

using Replay = std::function<std::string(const CellSummary&)>;

// A path or message that is not UTF-8 (a file name can be any bytes) is written with U+FFFD.
void write_json(const std::string& path, const nlohmann::json& json, std::span<const std::string> inputs) {
  write_output_file(path, json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", inputs);
}

void write_junit(const std::string& path, JunitSuite suite, std::span<const std::string> inputs,
                 std::vector<std::pair<std::string, std::string>> properties) {
  properties.emplace_back("version", build_json().at("version").get<std::string>());
  properties.emplace_back("commit", build_json().at("commit").get<std::string>());
  properties.emplace_back("contract_version", std::to_string(kContractVersion));
  suite.properties = std::move(properties);
  write_output_file(path, junit_xml(suite), inputs);
}

std::vector<std::pair<std::string, std::string>> tolerance_properties(const Tolerance& tolerance) {
  return {{"ulps", fmt::format("{}", tolerance.ulps)},
          {"norm_ulps", fmt::format("{}", tolerance.norm_ulps)},
          {"sum_rule", sum_rule_name(tolerance.sum_rule)},
          {"sigma", fmt::format("{}", tolerance.sigma)},
          {"floor", fmt::format("{}", tolerance.floor)}};
}

// The replay line of a campaign's cell: its counterexample's, when one was written.
Replay counterexample_replay(const std::vector<CounterexampleFile>& files) {
  return [&files](const CellSummary& cell) {
    for (const CounterexampleFile& f : files)
      if (f.backend == cell.backend && f.k == cell.k) return f.replay_command;
    return std::string();
  };
}

// The diagnosis of each failing cell's first failure, the first lines after the verdict line:
// "diagnosis: <name>: <evidence>", after "<backend> K=<k>: " when `labelled` (or several cells).
void print_diagnoses(std::span<const CellSummary> cells, bool labelled) {
  for (const CellSummary& c : cells)
    for (const std::string& line : diagnosis_lines(c.first_diagnoses))
      fmt::print("{}{}\n", labelled ? fmt::format("{} K={}: ", c.backend, c.k) : cells.size() > 1 ? c.backend + ": " : "",
                 line);
}

// The table, the verdict line, the counterexamples and the JSON and JUnit files of a campaign or
// a merge of one. With a budget (merge's), the JSON text and the JUnit XML are counted against
// it before anything is printed or written, each at twice its bound (a string grows by doubling).
int report_campaign(const std::vector<CellSummary>& cells, const std::vector<CounterexampleFile>& counterexamples,
                    const nlohmann::json& json, const std::string& json_path, const std::string& junit_path,
                    std::span<const std::string> inputs, MemoryBudget* budget = nullptr) {
  std::optional<JunitSuite> suite;
  if (!junit_path.empty()) {
    suite = junit_suite("campaign", cells, counterexample_replay(counterexamples));
    if (budget) budget->require(2 * junit_xml_bound(*suite), fmt::format("--junit {}: the XML", junit_path));
  }
  if (budget && !json_path.empty())
    budget->require(2 * dump_size_bound(json, 2), fmt::format("--json {}: the report's text", json_path));
  print_table(std::cout, cells);
  const std::uint64_t failures = total_failures(cells);
  fmt::print("{}\n", failures == 0 ? "OK: every backend agrees with the reference"
                                   : fmt::format("FAIL: {} failing (backend, K, case) triples", failures));
  print_diagnoses(cells, true);
  if (!json_path.empty()) write_json(json_path, json, inputs);
  if (suite) {
    auto properties = tolerance_properties(tolerance_from_json(json.at("tolerance")));
    for (const char* field : {"seed", "max_cases", "k", "hand_cases", "random_cases"})
      properties.emplace_back(field, json.at(field).dump());
    properties.emplace_back("shard", fmt::format("{}/{}", json.at("shard").at("index").get<std::uint32_t>(),
                                                 json.at("shard").at("count").get<std::uint32_t>()));
    write_junit(junit_path, std::move(*suite), inputs, std::move(properties));
  }
  return failures == 0 ? kAgree : kDisagree;
}

// Counts `count` results of the batch's output shape at K (lp_logits and lp_tokens [N, W], and
// lp_ranks [N] with ranks) against the budget before any is allocated.
void charge_results(MemoryBudget& budget, const FileArgs& args, const BatchFile& file, std::uint32_t k, int count,
                    bool ranks) {
  const OutputShape shape = validate_batch(file.batch.view(), k);
  const std::uint64_t bytes = shape.rows * shape.width * 8 + (ranks ? shape.rows * 4 : 0);  // < 2^52
  budget.charge(bytes * count, fmt::format("{}: holding {} of {} rows x {} slots at K = {}{}", args.input,
                                           count == 1 ? "the result" : fmt::format("{} results", count), shape.rows,
                                           shape.width, k, ranks ? " with ranks" : ""));
}

// The kept violations (--max-violations of them at most), then how many were counted by rule.
void print_violations(const std::string& label, const BackendOutcome& outcome) {
  if (!outcome.skipped.empty())
    fmt::print("{}skipped: the batch needs {}, which it does not implement (SPEC §4)\n", label, outcome.skipped);
  if (!outcome.error.empty()) fmt::print("{}threw: {}\n", label, outcome.error);
  if (!outcome.canonical_difference.empty()) fmt::print("{}{}\n", label, outcome.canonical_difference);
  const Verdict& verdict = outcome.verdict;
  for (const Violation& v : verdict.violations) fmt::print("{}{}\n", label, v.message());
  if (verdict.dropped() == 0) return;
  std::vector<std::string> by_rule;
  for (std::size_t r = 0; r < kRuleCount; ++r)
    if (verdict.rule_counts[r] > 0) by_rule.push_back(fmt::format("{}: {}", rule_name(Rule(r)), verdict.rule_counts[r]));
  fmt::print("{}... {} violations counted ({}), the first {} kept and listed (--max-violations)\n", label,
             verdict.violation_count, fmt::join(by_rule, ", "), verdict.violations.size());
}

// The table, the verdict line and (when asked) the JSON and JUnit reports of `compare` and `verify`.
int report_cells(const std::vector<CellSummary>& cells, const char* command, const FileArgs& args,
                 const Replay& replay) {
  print_table(std::cout, cells);
  const std::uint64_t failures = total_failures(cells);
  // A batch without output rows judges nothing: a gate it passed would have checked no value.
  const bool judged_nothing = failures == 0 && std::all_of(cells.begin(), cells.end(), [](const CellSummary& c) {
                                return c.stats.rows == 0;
                              });
  if (judged_nothing)
    fmt::print("NOTHING JUDGED: {} has no output rows (lp_output_offsets[B] = 0), so no value was checked\n",
               args.input);
  else
    fmt::print("{}\n", failures == 0 ? "OK: every result agrees with the reference"
                                     : fmt::format("FAIL: {} of {} results disagree", failures, cells.size()));
  print_diagnoses(cells, false);
  const std::vector<std::string> inputs = {args.input, args.result};
  if (!args.json.empty()) {
    nlohmann::json json = report_json(command, args.tolerance, cells);
    json["input"] = args.input;
    if (!args.result.empty()) json["result"] = args.result;
    json["k"] = cells.empty() ? nlohmann::json(nullptr) : nlohmann::json(cells.front().k);
    write_json(args.json, json, inputs);
  }
  if (!args.junit.empty()) {
    auto properties = tolerance_properties(args.tolerance);
    properties.emplace_back("input", args.input);
    if (!args.result.empty()) properties.emplace_back("result", args.result);
    write_junit(args.junit, junit_suite(command, cells, replay), inputs, std::move(properties));
  }
  if (judged_nothing) return kBadInput;
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
  check_outputs({{"--json", args.json}, {"--junit", args.junit}}, {});
  check_output_folder({"--out-dir", args.out_dir});
  CampaignOptions options;
  if (!args.shard.empty())
    options.shard = parse_shard(args.shard, args.shard_count, process_environment());
  else if (args.shard_count)
    throw UsageError("--shard-count is for --shard auto");
  if (options.shard.sharded() && args.cases == 0)
    throw UsageError(
        "--shard needs --cases N: a time budget makes the number of cases depend on the machine, so the "
        "shards of a timed run are not one run split; give every shard the same --seed and --cases");
  options.backends = backends_under_test(args.backends);
  if (!args.ks.empty()) options.ks = args.ks;
  if (!args.levels.empty()) {
    options.ks.clear();
    for (int levels : args.levels) options.ks.push_back(top_k(levels));
  }
  for (std::size_t i = 0; i < options.ks.size(); ++i)
    if (std::find(options.ks.begin(), options.ks.begin() + i, options.ks[i]) != options.ks.begin() + i)
      throw UsageError(fmt::format("{} lists K = {} twice", args.levels.empty() ? "--k" : "--levels", options.ks[i]));
  // A shard is bounded by its share of --cases; a time limit would make it machine-dependent.
  options.time_budget_s = args.time_s               ? *args.time_s
                          : options.shard.sharded() ? std::numeric_limits<double>::infinity()
                                                    : 60.0;
  if (args.cases > 0) options.max_cases = args.cases;
  options.seed = args.seed ? *args.seed : (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}());
  options.tolerance = args.tolerance;
  options.counterexample_dir = args.out_dir;
  options.program = args.program;
  options.progress = ::isatty(::fileno(stderr)) != 0;

  fmt::print("logprobs-check campaign: backends {} against the reference; K {}; seed {}; time {}{}{}\n",
             options.backends.empty() ? "(none)" : names_of(options.backends, ","), fmt::join(options.ks, ","),
             options.seed,
             std::isfinite(options.time_budget_s) ? fmt::format("{:g} s", options.time_budget_s) : "unlimited",
             options.max_cases ? fmt::format(", at most {} random cases", *options.max_cases) : "",
             options.shard.sharded()
                 ? fmt::format("; shard {}/{} ({})", options.shard.index, options.shard.count, options.shard.source)
                 : "");
  std::fflush(stdout);
  const CampaignReport report = run_campaign(options, std::cout);

  fmt::print("\n{} hand cases and {} random cases in {:.1f} s{}\n", report.hand_cases, report.random_cases,
             report.elapsed_s,
             options.shard.sharded() ? fmt::format(" (shard {}/{})", options.shard.index, options.shard.count) : "");
  if (options.max_cases && report.stopped_by_time)
    fmt::print("the time budget ended the random cases before --cases {} did\n", *options.max_cases);
  return report_campaign(report.cells, report.counterexamples, campaign_json(options, report), args.json, args.junit,
                         {});
}

int merge_command(const MergeArgs& args) {
  std::vector<NamedPath> reports;
  for (const std::string& path : args.files) reports.push_back({"a shard's report", path});
  check_outputs({{"--json", args.json}, {"--junit", args.junit}}, reports);
  std::vector<CampaignRun> runs;
  MemoryBudget budget(args.memory_budget);
  for (const std::string& path : args.files) runs.push_back(read_campaign_file(path, &budget));
  const MergedCampaign merged = merge_campaigns(std::move(runs), &budget);
  fmt::print("logprobs-check merge: {} shards of seed {}, K {}: {} hand cases and {} random cases\n", merged.shards,
             merged.json.at("seed").dump(), merged.json.at("k").dump(), merged.hand_cases, merged.random_cases);
  for (const CounterexampleFile& f : merged.counterexamples) {
    fmt::print("FAIL {} at K = {} on {}\n", f.backend, f.k, f.origin);
    for (const std::string& line : diagnosis_lines(f.diagnoses)) fmt::print("  {}\n", line);
    fmt::print("  replay: {}\n", f.replay_command);
  }
  return report_campaign(merged.cells, merged.counterexamples, merged.json, args.json, args.junit, args.files,
                         &budget);
}

int run_command(const FileArgs& args) {
  check_outputs({{"--output", args.output, "the result"}}, {{"--input", args.input}});
  const Backend& backend = available_backend(args.backend);
  MemoryBudget budget(args.memory_budget);
  const BatchFile file = read_batch_file(args.input, &budget);
  const std::uint32_t k = k_for(args, file);
  charge_results(budget, args, file, k, 1, args.ranks);
  const ResultData result = run_backend(backend, file.batch, k, args.ranks);
  write_result_file(args.output, result, {{"k", std::to_string(k)}, {"backend", args.backend}});
  fmt::print("{}: {} rows x {} slots{} from backend {} at K = {}\n", args.output, result.rows, result.width,
             result.ranks ? " and ranks" : "", args.backend, k);
  return kAgree;
}

int verify_command(const FileArgs& args) {
  check_outputs({{"--json", args.json}, {"--junit", args.junit}}, {{"--input", args.input}, {"--result", args.result}});
  MemoryBudget budget(args.memory_budget);
  const BatchFile file = read_batch_file(args.input, &budget);
  const ResultFile got = read_result_file(args.result, &budget);
  const std::uint32_t k = k_for(args, file, &got);
  charge_results(budget, args, file, k, 1, false);  // the reference's
  check_result_k(args, got, k);
  BackendOutcome outcome;
  // The diagnosis reads the failing rows again; a passing verdict costs nothing more.
  const KeptViolations kept{.max_kept = args.max_violations, .budget = &budget};
  const auto judge = [&](const ResultData& result) {
    outcome.verdict = judge_against_reference(file.batch, k, result, args.tolerance, kept);
    if (!outcome.verdict.ok()) outcome.diagnoses = diagnose(file.batch.view(), k, result, outcome.verdict, args.tolerance);
  };
  if (got.layout == ResultLayout::packed) {
    judge(got.packed);
  } else {  // packed in a copy, as large as the file's tensors
    budget.charge((got.split.rows * (got.split.k + 1)) * 8, fmt::format("{}: its packed copy", args.result));
    judge(got.as_packed(file.batch.view()));
  }
  print_violations("", outcome);
  // The row names what produced the result: `run` records its backend in the metadata.
  const auto producer = got.metadata.find("backend");
  std::vector<CellSummary> cells;
  cells.emplace_back(producer == got.metadata.end() ? args.result : producer->second, k);
  cells.back().add(outcome);
  if (!outcome.ok()) cells.back().note_failure(args.result, outcome);
  fmt::print("{}: B = {}, V = {}, {} output rows\n", args.result, file.batch.sampled_tokens.size(), file.batch.vocab,
             file.batch.view().output_rows());
  const std::string replay =
      fmt::format("{} verify --input {} --result {} --k {}{}", shell_word(args.program), shell_word(args.input),
                  shell_word(args.result), k, tolerance_flags(args.tolerance));
  return report_cells(cells, "verify", args, [&](const CellSummary&) { return replay; });
}

int compare_command(const FileArgs& args) {
  check_outputs({{"--json", args.json}, {"--junit", args.junit}}, {{"--input", args.input}});
  const std::vector<const Backend*> backends = backends_under_test(args.backends);
  MemoryBudget budget(args.memory_budget);
  const BatchFile file = read_batch_file(args.input, &budget);
  const std::uint32_t k = k_for(args, file);
  // The reference's result and one backend's at a time, and the canonical backend's when a
  // backend is held to its bits (as canonical_result decides).
  const bool holds_canonical = std::any_of(backends.begin(), backends.end(), [](const Backend* b) {
    return b->claims_canonical_arithmetic() && b->name() != kCanonicalName;
  });
  charge_results(budget, args, file, k, holds_canonical ? 3 : 2, args.ranks);
  const ResultData reference = run_backend(reference_backend(), file.batch, k);
  const std::optional<ResultData> canonical = canonical_result(backends, file.batch, k, args.ranks);

  std::vector<CellSummary> cells;
  for (const Backend* backend : backends) {
    // A backend named on the command line is held to the request: lacking a part is an error.
    const std::string lacking = missing_part(backend->features(), file.batch.view(), k, args.ranks);
    if (!args.backends.empty() && !lacking.empty())
      throw UnsupportedPart(
          fmt::format("backend {} does not implement {}, which {} needs", backend->name(), lacking, args.input));
    // Each backend's verdict is charged while it is held, and given back after.
    MemoryBudget verdict_budget(budget.left());
    const BackendOutcome outcome =
        judge_backend(*backend, file.batch, k, args.ranks, reference, args.tolerance, canonical ? &*canonical : nullptr,
                      Diagnose::when_failing, {.max_kept = args.max_violations, .budget = &verdict_budget});
    print_violations(fmt::format("{}: ", backend->name()), outcome);
    cells.emplace_back(std::string(backend->name()), k);
    cells.back().add(outcome);
    if (!outcome.ok()) cells.back().note_failure(args.input, outcome);
  }
  fmt::print("{}: B = {}, V = {}, {} output rows\n", args.input, file.batch.sampled_tokens.size(), file.batch.vocab,
             file.batch.view().output_rows());
  return report_cells(cells, "compare", args, [&](const CellSummary& cell) {
    return fmt::format("{} compare --input {} --k {}{} --backends {}{}", shell_word(args.program),
                       shell_word(args.input), k, args.ranks ? " --ranks" : "", shell_word(cell.backend),
                       tolerance_flags(args.tolerance));
  });
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
