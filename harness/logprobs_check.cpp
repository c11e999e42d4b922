// logprobs-check: judges logprobs backends against the contract (SPEC §5).
// Exit status: 0 all agree, 1 a disagreement or violation, 2 bad usage or invalid input.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "batch_file.hpp"
#include "campaign.hpp"

namespace logprobs {
namespace {

constexpr int kAgree = 0;
constexpr int kDisagree = 1;
constexpr int kBadInput = 2;

// Bad usage found after parsing (an unknown backend, levels missing): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CampaignArgs {
  double time_s = 60;
  std::uint64_t cases = 0;  // 0: no cap
  std::uint64_t seed = 0;
  std::vector<int> levels = kCampaignLevels;
  std::vector<std::string> backends;
  std::string json;
  std::string out_dir = ".";
  CLI::Option* seed_option = nullptr;
  std::vector<CLI::Option*> options;  // to tell whether any was given
};

struct FileArgs {
  std::string input;
  std::string result;
  std::string output;
  std::string backend;
  int levels = -1;
  std::vector<std::string> backends;
  std::string json;
  std::size_t max_violations = 20;
};

Tolerance tolerance;

void add_tolerance_options(CLI::App& app, std::vector<CLI::Option*>* record = nullptr) {
  CLI::Option* atol = app.add_option("--atol", tolerance.atol, "absolute tolerance, scaled by max(1, |row max|)")
                          ->check(CLI::NonNegativeNumber)
                          ->capture_default_str();
  CLI::Option* ulps =
      app.add_option("--ulps", tolerance.ulps, "tolerance in ULPs of the reference value")->check(CLI::NonNegativeNumber)->capture_default_str();
  CLI::Option* summation =
      app.add_option("--summation", tolerance.summation,
                     "multiple of the f32 summation bound V * 2^-24 also allowed (0: SPEC §5's rule alone)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
  if (record) record->insert(record->end(), {atol, ulps, summation});
}

void add_campaign_options(CLI::App& app, CampaignArgs& args) {
  auto& o = args.options;
  o.push_back(app.add_option("--time", args.time_s, "seconds of random cases after the hand cases")
                  ->check(CLI::NonNegativeNumber)
                  ->capture_default_str());
  o.push_back(app.add_option("--cases", args.cases, "random cases at most (0: as many as the time allows)"));
  args.seed_option = app.add_option("--seed", args.seed, "seed of the random cases (default: a fresh one, printed)");
  o.push_back(args.seed_option);
  o.push_back(app.add_option("--levels", args.levels, "levels to cover, comma-separated")
                  ->delimiter(',')
                  ->check(CLI::Range(0, kMaxLevels))
                  ->capture_default_str());
  o.push_back(app.add_option("--backends", args.backends, "backends to test (default: every available one)")
                  ->delimiter(','));
  o.push_back(app.add_option("--json", args.json, "also write the results as JSON to this file"));
  o.push_back(app.add_option("--out-dir", args.out_dir, "folder for counterexample batch files")->capture_default_str());
  add_tolerance_options(app, &o);
}

const Backend& available_backend(const std::string& name) {
  const Backend* backend = find_backend(name);
  if (backend == nullptr) {
    std::string known;
    for (const Backend* b : all_backends()) known += (known.empty() ? "" : ", ") + std::string(b->name());
    throw UsageError(fmt::format("unknown backend '{}' (known: {})", name, known));
  }
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
    if (b->name() != "reference" && b->availability().available) chosen.push_back(b);
  return chosen;
}

// --levels, else the batch file's metadata, else (for verify) the result file's metadata.
int levels_for(const FileArgs& args, const BatchFile& file, const ResultFile* result = nullptr) {
  if (args.levels >= 0) return args.levels;
  if (file.levels) return *file.levels;
  if (result != nullptr && result->levels) return *result->levels;
  throw UsageError(fmt::format("--levels not given and {} has no \"levels\" in its metadata", args.input));
}

void write_json(const std::string& path, const nlohmann::json& json) {
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << '\n';
  out.close();
  if (!out) throw UsageError(fmt::format("cannot write JSON to {}", path));
}

std::string join(const std::vector<const Backend*>& backends) {
  std::string names;
  for (const Backend* b : backends) names += (names.empty() ? "" : ",") + std::string(b->name());
  return names;
}

int run_campaign_command(const CampaignArgs& args, const std::string& program) {
  CampaignOptions options;
  options.backends = backends_under_test(args.backends);
  options.levels = args.levels;
  options.time_budget_s = args.time_s;
  if (args.cases > 0) options.max_cases = args.cases;
  options.seed = args.seed_option->count() > 0 ? args.seed : (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}());
  options.tolerance = tolerance;
  options.counterexample_dir = args.out_dir;
  options.program = program;
  options.progress = ::isatty(::fileno(stderr)) != 0;

  std::string levels;
  for (int l : options.levels) levels += (levels.empty() ? "" : ",") + std::to_string(l);
  fmt::print("logprobs-check campaign: backends {} against the reference; levels {}; seed {}; time {:g} s{}\n",
             options.backends.empty() ? "(none)" : join(options.backends), levels, options.seed, options.time_budget_s,
             options.max_cases ? fmt::format(", at most {} random cases", *options.max_cases) : "");
  std::fflush(stdout);
  const CampaignReport report = run_campaign(options, std::cout);

  fmt::print("\n{} hand cases and {} random cases in {:.1f} s\n", report.hand_cases, report.random_cases,
             report.elapsed_s);
  print_table(std::cout, report.cells);
  const std::uint64_t failures = report.failures();
  fmt::print("{}\n", failures == 0 ? "OK: every backend agrees with the reference"
                                   : fmt::format("FAIL: {} failing (backend, levels, case) triples", failures));

  if (!args.json.empty()) {
    nlohmann::json json = report_metadata(tolerance);
    json["command"] = "campaign";
    json["seed"] = options.seed;
    json["time_budget_s"] = options.time_budget_s;
    json["max_cases"] = options.max_cases ? nlohmann::json(*options.max_cases) : nlohmann::json(nullptr);
    json["elapsed_s"] = report.elapsed_s;
    json["hand_cases"] = report.hand_cases;
    json["random_cases"] = report.random_cases;
    json["levels"] = options.levels;
    json["results"] = nlohmann::json::array();
    for (const CellSummary& c : report.cells) json["results"].push_back(to_json(c));
    json["counterexamples"] = nlohmann::json::array();
    for (const CounterexampleFile& f : report.counterexamples) json["counterexamples"].push_back(to_json(f));
    json["ok"] = failures == 0;
    write_json(args.json, json);
  }
  return failures == 0 ? kAgree : kDisagree;
}

void print_violations(const std::string& label, const BackendOutcome& outcome, std::size_t max_violations) {
  if (!outcome.error.empty()) fmt::print("{}threw: {}\n", label, outcome.error);
  const auto& violations = outcome.verdict.violations;
  for (std::size_t i = 0; i < violations.size() && i < max_violations; ++i)
    fmt::print("{}{}\n", label, violations[i].message());
  if (violations.size() > max_violations)
    fmt::print("{}... and {} more violations\n", label, violations.size() - max_violations);
}

int run_command(const FileArgs& args) {
  const Backend& backend = available_backend(args.backend);
  const BatchFile file = read_batch_file(args.input);
  const int levels = levels_for(args, file);
  const ResultData result = run_backend(backend, file.batch, levels);
  write_result_file(args.output, result, {{"levels", std::to_string(levels)}, {"backend", args.backend}});
  fmt::print("{}: {} rows x {} slots from backend {} at levels {}\n", args.output, result.rows, result.width,
             args.backend, levels);
  return kAgree;
}

int verify_command(const FileArgs& args) {
  const BatchFile file = read_batch_file(args.input);
  const ResultFile got = read_result_file(args.result);
  const int levels = levels_for(args, file, &got);
  const ResultData reference = run_backend(*find_backend("reference"), file.batch, levels);
  const Verdict verdict = compare_result(file.batch, levels, reference, got.result, tolerance);
  print_violations("", {verdict, "", 0}, args.max_violations);
  fmt::print("{}: {} rows at levels {}; max abs error {:.3g}, max ULP error {:.3g}, tolerance used {:.3g}\n",
             verdict.ok() ? "OK"
                          : fmt::format("FAIL ({} violation{})", verdict.violations.size(),
                                        verdict.violations.size() == 1 ? "" : "s"), verdict.stats.rows,
             levels, verdict.stats.max_abs_error, verdict.stats.max_ulp_error, verdict.stats.max_tolerance_used);
  return verdict.ok() ? kAgree : kDisagree;
}

int compare_command(const FileArgs& args) {
  const BatchFile file = read_batch_file(args.input);
  const int levels = levels_for(args, file);
  const std::vector<const Backend*> backends = backends_under_test(args.backends);
  const ResultData reference = run_backend(*find_backend("reference"), file.batch, levels);

  std::vector<CellSummary> cells;
  for (const Backend* backend : backends) {
    const BackendOutcome outcome = judge_backend(*backend, file.batch, levels, reference, tolerance);
    print_violations(fmt::format("{}: ", backend->name()), outcome, args.max_violations);
    cells.emplace_back(std::string(backend->name()), levels);
    cells.back().add(outcome);
  }
  fmt::print("{}: B = {}, V = {}, {} output rows\n", args.input, file.batch.sampled_tokens.size(), file.batch.vocab,
             file.batch.view().output_rows());
  print_table(std::cout, cells);
  std::uint64_t failures = 0;
  for (const CellSummary& c : cells) failures += c.failures;
  fmt::print("{}\n", failures == 0 ? "OK: every backend agrees with the reference"
                                   : fmt::format("FAIL: {} of {} backends disagree", failures, cells.size()));

  if (!args.json.empty()) {
    nlohmann::json json = report_metadata(tolerance);
    json["command"] = "compare";
    json["input"] = args.input;
    json["levels"] = levels;
    json["results"] = nlohmann::json::array();
    for (const CellSummary& c : cells) json["results"].push_back(to_json(c));
    json["ok"] = failures == 0;
    write_json(args.json, json);
  }
  return failures == 0 ? kAgree : kDisagree;
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

int run_main(int argc, char** argv) {
  CLI::App app{
      "logprobs-check: judges logprobs / top_logprobs backends against the reference under the contract "
      "(SPEC.md). Exit status: 0 all agree, 1 a disagreement or violation, 2 bad usage or invalid input.\n"
      "Without a subcommand it runs the campaign."};
  app.require_subcommand(0, 1);

  CampaignArgs top_campaign;  // `logprobs-check --time 5` is the campaign too
  add_campaign_options(app, top_campaign);
  CampaignArgs campaign_args;
  CLI::App* campaign = app.add_subcommand(
      "campaign", "every available backend against the reference: the hand cases, then random batches");
  add_campaign_options(*campaign, campaign_args);

  FileArgs run_args;
  CLI::App* run = app.add_subcommand("run", "run one backend on a batch file and write its result file");
  run->add_option("--backend", run_args.backend, "backend name")->required();
  run->add_option("--levels", run_args.levels, "top-K levels (default: the batch file's metadata)")
      ->check(CLI::Range(0, kMaxLevels));
  run->add_option("--input", run_args.input, "batch file (safetensors)")->required();
  run->add_option("--output", run_args.output, "result file to write (safetensors)")->required();

  FileArgs verify_args;
  CLI::App* verify =
      app.add_subcommand("verify", "judge a result file from any implementation against the contract");
  verify->add_option("--input", verify_args.input, "batch file (safetensors)")->required();
  verify->add_option("--result", verify_args.result, "result file: lp_logits F32 [N, W], lp_tokens U32 [N, W]")
      ->required();
  verify->add_option("--levels", verify_args.levels,
                     "top-K levels (default: the batch file's metadata, else the result file's)")
      ->check(CLI::Range(0, kMaxLevels));
  verify->add_option("--max-violations", verify_args.max_violations, "violations listed at most")
      ->capture_default_str();
  add_tolerance_options(*verify);

  FileArgs compare_args;
  CLI::App* compare = app.add_subcommand("compare", "the chosen backends against the reference on one batch file");
  compare->add_option("--input", compare_args.input, "batch file (safetensors)")->required();
  compare->add_option("--levels", compare_args.levels, "top-K levels (default: the batch file's metadata)")
      ->check(CLI::Range(0, kMaxLevels));
  compare->add_option("--backends", compare_args.backends, "backends, comma-separated (default: every available one)")
      ->delimiter(',');
  compare->add_option("--json", compare_args.json, "also write the results as JSON to this file");
  compare->add_option("--max-violations", compare_args.max_violations, "violations listed per backend at most")
      ->capture_default_str();
  add_tolerance_options(*compare);

  CLI::App* backends = app.add_subcommand("backends", "list the backends, available here or not and why");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help (code 0) or the error
    return code == 0 ? kAgree : kBadInput;
  }

  try {
    if (campaign->parsed() || app.get_subcommands().empty()) {
      return run_campaign_command(campaign->parsed() ? campaign_args : top_campaign, argv[0]);
    }
    for (const CLI::Option* o : top_campaign.options)
      if (o->count() > 0)
        throw UsageError(fmt::format("{} is an option of the campaign, not of '{}'", o->get_name(),
                                     app.get_subcommands().front()->get_name()));
    if (run->parsed()) return run_command(run_args);
    if (verify->parsed()) return verify_command(verify_args);
    if (compare->parsed()) return compare_command(compare_args);
    if (backends->parsed()) return backends_command();
  } catch (const UsageError& e) {
    fmt::print(stderr, "logprobs-check: {}\n", e.what());
    return kBadInput;
  } catch (const BatchFileError& e) {
    fmt::print(stderr, "logprobs-check: {}\n", e.what());  // names the file and what is wrong with it
    return kBadInput;
  } catch (const InvalidBatch& e) {
    fmt::print(stderr, "logprobs-check: invalid batch (SPEC §4): {}\n", e.what());
    return kBadInput;
  } catch (const std::exception& e) {
    // Neither a verdict nor the user's fault (a generator bug, a full disk): still not a pass.
    fmt::print(stderr, "logprobs-check: internal error: {}\n", e.what());
    return kBadInput;
  }
  return kBadInput;
}

}  // namespace
}  // namespace logprobs

int main(int argc, char** argv) { return logprobs::run_main(argc, argv); }
