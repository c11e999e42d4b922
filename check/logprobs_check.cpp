// logprobs-check: judges logprobs backends against the contract (SPEC §5).
// Exit status: 0 all agree, 1 a disagreement or violation, 2 bad usage or invalid input.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.hpp"
#include "harness/batch_file.hpp"

namespace logprobs::cli {
namespace {

void add_tolerance_options(CLI::App& app, Tolerance& tolerance, std::vector<CLI::Option*>* record = nullptr) {
  CLI::Option* atol = app.add_option("--atol", tolerance.atol, "absolute tolerance, scaled by max(1, |row max|)")
                          ->check(CLI::NonNegativeNumber)
                          ->capture_default_str();
  CLI::Option* ulps = app.add_option("--ulps", tolerance.ulps, "tolerance in ULPs of the reference value")
                          ->check(CLI::NonNegativeNumber)
                          ->capture_default_str();
  CLI::Option* summation =
      app.add_option("--summation", tolerance.summation,
                     "multiple of the f32 summation bound V * 2^-24 also allowed (0: SPEC §5's rule alone)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
  if (record) record->insert(record->end(), {atol, ulps, summation});
}

// The campaign's options, on the top level (`logprobs-check --time 5`) or on `campaign`.
// `given` collects them, to tell whether any was given at the top level.
void add_campaign_options(CLI::App& app, CampaignArgs& args, std::vector<CLI::Option*>& given) {
  given.push_back(app.add_option("--time", args.time_s, "seconds of random cases after the hand cases")
                      ->check(CLI::NonNegativeNumber)
                      ->capture_default_str());
  given.push_back(app.add_option("--cases", args.cases, "random cases at most (0: as many as the time allows)"));
  given.push_back(app.add_option("--seed", args.seed, "seed of the random cases (default: a fresh one, printed)"));
  given.push_back(app.add_option("--levels", args.levels, "levels to cover, comma-separated")
                      ->delimiter(',')
                      ->check(CLI::Range(0, kMaxLevels))
                      ->capture_default_str());
  given.push_back(
      app.add_option("--backends", args.backends, "backends to test (default: every available one)")->delimiter(','));
  given.push_back(app.add_option("--json", args.json, "also write the results as JSON to this file"));
  given.push_back(
      app.add_option("--out-dir", args.out_dir, "folder for counterexample batch files")->capture_default_str());
  add_tolerance_options(app, args.tolerance, &given);
}

void add_levels_option(CLI::App& app, FileArgs& args, const char* help) {
  app.add_option("--levels", args.levels, help)->check(CLI::Range(0, kMaxLevels));
}

int run_main(int argc, char** argv) {
  CLI::App app{
      "logprobs-check: judges logprobs / top_logprobs backends against the reference under the contract "
      "(SPEC.md). Exit status: 0 all agree, 1 a disagreement or violation, 2 bad usage or invalid input.\n"
      "Without a subcommand it runs the campaign."};
  app.require_subcommand(0, 1);

  CampaignArgs top_campaign;  // `logprobs-check --time 5` is the campaign too
  std::vector<CLI::Option*> top_campaign_options;
  add_campaign_options(app, top_campaign, top_campaign_options);
  CampaignArgs campaign_args;
  std::vector<CLI::Option*> ignored;
  CLI::App* campaign = app.add_subcommand(
      "campaign", "every available backend against the reference: the hand cases, then random batches");
  add_campaign_options(*campaign, campaign_args, ignored);

  FileArgs run_args;
  CLI::App* run = app.add_subcommand("run", "run one backend on a batch file and write its result file");
  run->add_option("--backend", run_args.backend, "backend name")->required();
  add_levels_option(*run, run_args, "top-K levels (default: the batch file's metadata)");
  run->add_option("--input", run_args.input, "batch file (safetensors)")->required();
  run->add_option("--output", run_args.output, "result file to write (safetensors)")->required();

  FileArgs verify_args;
  CLI::App* verify = app.add_subcommand("verify", "judge a result file from any implementation against the contract");
  verify->add_option("--input", verify_args.input, "batch file (safetensors)")->required();
  verify->add_option("--result", verify_args.result, "result file: lp_logits F32 [N, W], lp_tokens U32 [N, W]")
      ->required();
  add_levels_option(*verify, verify_args, "top-K levels (default: the batch file's metadata, else the result file's)");
  verify->add_option("--json", verify_args.json, "also write the verdict as JSON to this file");
  verify->add_option("--max-violations", verify_args.max_violations, "violations listed at most")
      ->capture_default_str();
  add_tolerance_options(*verify, verify_args.tolerance);

  FileArgs compare_args;
  CLI::App* compare = app.add_subcommand("compare", "the chosen backends against the reference on one batch file");
  compare->add_option("--input", compare_args.input, "batch file (safetensors)")->required();
  add_levels_option(*compare, compare_args, "top-K levels (default: the batch file's metadata)");
  compare->add_option("--backends", compare_args.backends, "backends, comma-separated (default: every available one)")
      ->delimiter(',');
  compare->add_option("--json", compare_args.json, "also write the results as JSON to this file");
  compare->add_option("--max-violations", compare_args.max_violations, "violations listed per backend at most")
      ->capture_default_str();
  add_tolerance_options(*compare, compare_args.tolerance);

  CLI::App* backends = app.add_subcommand("backends", "list the backends, available here or not and why");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help (code 0) or the error
    return code == 0 ? kAgree : kBadInput;
  }

  try {
    if (campaign->parsed() || app.get_subcommands().empty()) {
      CampaignArgs& args = campaign->parsed() ? campaign_args : top_campaign;
      args.program = argv[0];
      return campaign_command(args);
    }
    for (const CLI::Option* o : top_campaign_options)
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
  } catch (const FileError& e) {
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
}  // namespace logprobs::cli

int main(int argc, char** argv) { return logprobs::cli::run_main(argc, argv); }
