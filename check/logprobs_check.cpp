// logprobs-check: judges logprobs backends against the contract (SPEC §5).
// Exit status: 0 all agree, 1 a disagreement or violation, 2 bad usage or invalid input.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <system_error>

#include "campaign_file.hpp"
#include "commands.hpp"
#include "harness/batch_file.hpp"
#include "merge.hpp"
#include "output_file.hpp"

namespace logprobs::cli {
namespace {

// CLI11's NonNegativeNumber lets NaN through (every comparison with NaN is false); a tolerance
// or a time must be a finite number.
const CLI::Validator kFiniteNonNegative(
    [](std::string& text) {
      double value = 0;
      if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value) || value < 0)
        return std::string("must be a finite number >= 0, got ") + text;
      return std::string();
    },
    "FINITE >= 0");

// The leading decimal digits of `text` as a 64-bit number: none when there are none or they
// do not fit.
std::optional<std::uint64_t> leading_decimal(std::string_view text, std::size_t& digits) {
  digits = std::min(text.find_first_not_of("0123456789"), text.size());
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (digits == 0 || ec != std::errc()) return std::nullopt;
  return value;
}

// CLI11 2.1.2 reads unsigned options with strtoull, base 0, unchecked: "-1" becomes 2^64 - 1, a
// number past 2^64 - 1 becomes 2^64 - 1, "010" is octal 8 and "0x10" is 16. Every whole-number
// option goes through this first, as a transform (CLI11 runs transforms before checks and hands
// checks a copy): decimal digits only, within 64 bits, rewritten without leading zeros; a range
// or the option's type then bounds it further.
const CLI::Validator kPlainDecimal(
    [](std::string& text) {
      std::size_t digits = 0;
      const std::optional<std::uint64_t> value = leading_decimal(text, digits);
      if (!value || digits != text.size())
        return "must be a whole number in decimal digits, 0.." + std::to_string(UINT64_MAX) + ", got " + text;
      text = std::to_string(*value);  // what CLI11 reads next: "010" would be octal
      return std::string();
    },
    "UINT");

// A byte count: decimal digits, then optionally a unit of CLI11's AsSizeValue (k = 1000,
// ki = 1024, ..., case-insensitive: 4G, 512MiB), checked like kPlainDecimal before the unit is
// applied (AsSizeValue itself reads "-1" as 2^64 - 1).
const CLI::Validator kByteSize(
    [](std::string& text) {
      std::size_t digits = 0;
      const std::optional<std::uint64_t> value = leading_decimal(text, digits);
      const std::string unit = text.substr(digits);
      if (!value || !std::all_of(unit.begin(), unit.end(), [](unsigned char c) { return std::isalpha(c); }))
        return "must be a byte count (digits, then optionally a unit: 4G, 512MiB), got " + text;
      text = std::to_string(*value) + unit;
      return CLI::AsSizeValue(true)(text);
    },
    "BYTES");

void add_tolerance_options(CLI::App& app, Tolerance& tolerance, std::vector<CLI::Option*>* record = nullptr) {
  CLI::Option* sum_rule =
      app.add_option_function<std::string>(
             "--sum-rule", [&tolerance](const std::string& name) { tolerance.sum_rule = *sum_rule_from_name(name); },
             "the summation term sum_err (SPEC §5): calibrated = max(sigma * dev, floor * 2^-24), dev the drift of "
             "honest f32 sums on the row; linear = V * 2^-24 (one f32 chain); sqrt = sigma * sqrt(V) * 2^-24 "
             "(contract v2)")
          ->check(CLI::IsMember({"calibrated", "linear", "sqrt"}))
          ->default_str(sum_rule_name(tolerance.sum_rule));
  std::vector<CLI::Option*> added = {
      app.add_option("--ulps", tolerance.ulps, "tolerance in ULPs of the reference value")
          ->check(kFiniteNonNegative)
          ->capture_default_str(),
      app.add_option("--norm-ulps", tolerance.norm_ulps, "tolerance in ULPs of |m| + log V (the normalizer's rounding)")
          ->check(kFiniteNonNegative)
          ->capture_default_str(),
      sum_rule,
      app.add_option("--sigma", tolerance.sigma, "calibrated: sum_err >= sigma * dev; sqrt: sigma * sqrt(V) * 2^-24")
          ->check(kFiniteNonNegative)
          ->capture_default_str(),
      app.add_option("--floor", tolerance.floor, "calibrated: sum_err >= floor * 2^-24")
          ->check(kFiniteNonNegative)
          ->capture_default_str(),
      app.add_flag_callback(
             "--linear-sum", [&tolerance] { tolerance.sum_rule = SumRule::linear; },
             "the same as --sum-rule linear: a kernel that sums in one f32 chain")
          ->excludes(sum_rule),
  };
  if (record) record->insert(record->end(), added.begin(), added.end());
}

// --k K or --levels L (K = 2^L - 1) for a command on one batch file.
void add_k_options(CLI::App& app, KArgs& args, const char* fallback) {
  CLI::Option* k = app.add_option("--k", args.k, std::string("top-K width 0..65535 (default: ") + fallback + ")")
                       ->transform(kPlainDecimal)
                       ->check(CLI::Range(std::uint32_t{0}, kMaxK));
  app.add_option("--levels", args.levels, "MAX's levels L instead: K = 2^L - 1")
      ->transform(kPlainDecimal)
      ->check(CLI::Range(0, kMaxLevels))
      ->excludes(k);
}

// Every command that reads files: the memory they may imply.
void add_memory_budget_option(CLI::App& app, std::uint64_t& budget) {
  budget = default_memory_budget();
  app.add_option("--memory-budget", budget,
                 "bytes the input files may make this command allocate (tensors read, results computed), checked "
                 "before allocating (default: half of this machine's memory)")
      ->transform(kByteSize)
      ->capture_default_str();
}

// The campaign's options, on the top level (`logprobs-check --time 5`) or on `campaign`.
// `given` collects them, to tell whether any was given at the top level.
void add_campaign_options(CLI::App& app, CampaignArgs& args, std::vector<CLI::Option*>& given) {
  given.push_back(app.add_option("--time", args.time_s,
                                 "seconds of random cases after the hand cases (default 60; a shard: no limit)")
                      ->check(kFiniteNonNegative));
  given.push_back(app.add_option("--cases", args.cases, "random cases at most (0: as many as the time allows)")
                      ->transform(kPlainDecimal));
  given.push_back(app.add_option("--seed", args.seed, "seed of the random cases (default: a fresh one, printed)")
                      ->transform(kPlainDecimal));
  CLI::Option* k =
      app.add_option("--k", args.ks, "K to cover, comma-separated (default: 0,1,3,5,7,20,31,255,4095,65535)")
          ->delimiter(',')
          ->transform(kPlainDecimal)
          ->check(CLI::Range(std::uint32_t{0}, kMaxK));
  given.push_back(k);
  given.push_back(
      app.add_option("--levels", args.levels, "MAX's levels to cover instead (K = 2^L - 1), comma-separated")
          ->delimiter(',')
          ->transform(kPlainDecimal)
          ->check(CLI::Range(0, kMaxLevels))
          ->excludes(k));
  given.push_back(
      app.add_option("--backends", args.backends, "backends to test (default: every available one)")->delimiter(','));
  given.push_back(app.add_option("--json", args.json, "also write the results as JSON to this file"));
  given.push_back(app.add_option("--junit", args.junit, "also write the results as JUnit XML to this file"));
  given.push_back(app.add_option("--shard", args.shard,
                                 "run share I/N of the cases (0 <= I < N; needs --cases), or 'auto': from "
                                 "SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX, CI_NODE_INDEX or LOGPROBS_SHARD_INDEX"));
  given.push_back(app.add_option("--shard-count", args.shard_count,
                                 "with --shard auto: the number of shards, where the engine does not say "
                                 "(a Kubernetes Indexed Job's completions)")
                      ->transform(kPlainDecimal));
  given.push_back(
      app.add_option("--out-dir", args.out_dir, "folder for counterexample batch files")->capture_default_str());
  add_tolerance_options(app, args.tolerance, &given);
}

// A line on stderr that cannot fail the command: a full or closed stderr (2>/dev/full, 2>&-)
// loses the line, never the exit status (fmt::print would throw inside the handlers below).
void say(const std::string& line) {
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
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

  FileArgs run_args, verify_args, compare_args;
  CLI::App* run = app.add_subcommand("run", "run one backend on a batch file and write its result file");
  run->add_option("--backend", run_args.backend, "backend name")->required();
  add_k_options(*run, run_args.k, "the batch file's metadata");
  run->add_option("--input", run_args.input, "batch file (safetensors)")->required();
  run->add_option("--output", run_args.output, "result file to write (safetensors)")->required();
  run->add_flag("--ranks", run_args.ranks, "also compute the evaluated token's rank (lp_ranks)");
  add_memory_budget_option(*run, run_args.memory_budget);

  CLI::App* verify = app.add_subcommand("verify", "judge a result file from any implementation against the contract");
  verify->add_option("--input", verify_args.input, "batch file (safetensors)")->required();
  verify
      ->add_option("--result", verify_args.result,
                   "result file, packed (lp_logits, lp_tokens, lp_ranks) or split (top_tokens, top_logprobs, "
                   "sampled_logprobs, sampled_ranks)")
      ->required();
  add_k_options(*verify, verify_args.k, "the batch file's metadata, else the result file's");
  verify->add_option("--json", verify_args.json, "also write the verdict as JSON to this file");
  verify->add_option("--junit", verify_args.junit, "also write the verdict as JUnit XML to this file");
  verify->add_option("--max-violations", verify_args.max_violations,
                     "violations kept and listed at most (all are counted)")
      ->transform(kPlainDecimal)
      ->capture_default_str();
  add_tolerance_options(*verify, verify_args.tolerance);
  add_memory_budget_option(*verify, verify_args.memory_budget);

  CLI::App* compare = app.add_subcommand("compare", "the chosen backends against the reference on one batch file");
  compare->add_option("--input", compare_args.input, "batch file (safetensors)")->required();
  add_k_options(*compare, compare_args.k, "the batch file's metadata");
  compare->add_flag("--ranks", compare_args.ranks, "also ask for and judge the evaluated token's rank");
  compare->add_option("--backends", compare_args.backends, "backends, comma-separated (default: every available one)")
      ->delimiter(',');
  compare->add_option("--json", compare_args.json, "also write the results as JSON to this file");
  compare->add_option("--junit", compare_args.junit, "also write the results as JUnit XML to this file");
  compare->add_option("--max-violations", compare_args.max_violations,
                      "violations kept and listed per backend at most (all are counted)")
      ->transform(kPlainDecimal)
      ->capture_default_str();
  add_tolerance_options(*compare, compare_args.tolerance);
  add_memory_budget_option(*compare, compare_args.memory_budget);

  MergeArgs merge_args;
  CLI::App* merge = app.add_subcommand(
      "merge", "the campaign reports (--json) of the shards of one run as one table, exiting as that run would");
  merge->add_option("reports", merge_args.files, "campaign JSON reports, one per shard")->required();
  merge->add_option("--json", merge_args.json, "write the merged report as JSON to this file");
  merge->add_option("--junit", merge_args.junit, "write the merged results as JUnit XML to this file");
  add_memory_budget_option(*merge, merge_args.memory_budget);

  CLI::App* backends = app.add_subcommand("backends", "list the backends, available here or not and why");

  FileArgs tolerance_args;
  std::uint64_t tolerance_row = 0;
  CLI::App* tolerance = app.add_subcommand(
      "tolerance", "every term of the tolerance (SPEC §5) on one output row of a batch file: what the judge allows");
  tolerance->add_option("--input", tolerance_args.input, "batch file (safetensors)")->required();
  tolerance->add_option("--row", tolerance_row, "output row (as violations name it)")
      ->transform(kPlainDecimal)
      ->required();
  add_tolerance_options(*tolerance, tolerance_args.tolerance);
  add_memory_budget_option(*tolerance, tolerance_args.memory_budget);

  // A mistyped command reads to CLI11 as stray arguments ("The following arguments were not
  // expected"): name it, and the commands there are.
  if (argc > 1 && argv[1][0] != '-') {
    std::string commands;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      say(fmt::format("logprobs-check: unknown command '{}' (commands: {}; options alone run the campaign)\n",
                      argv[1], commands));
      return kBadInput;
    }
  }
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
    verify_args.program = compare_args.program = argv[0];
    if (run->parsed()) return run_command(run_args);
    if (verify->parsed()) return verify_command(verify_args);
    if (compare->parsed()) return compare_command(compare_args);
    if (merge->parsed()) return merge_command(merge_args);
    if (backends->parsed()) return backends_command();
    if (tolerance->parsed()) return tolerance_command(tolerance_args, tolerance_row);
  } catch (const UsageError& e) {
    say(fmt::format("logprobs-check: {}\n", e.what()));
    return kBadInput;
  } catch (const FileError& e) {
    say(fmt::format("logprobs-check: {}\n", e.what()));  // names the file and what is wrong with it
    return kBadInput;
  } catch (const InvalidBatch& e) {
    say(fmt::format("logprobs-check: invalid batch (SPEC §4): {}\n", e.what()));
    return kBadInput;
  } catch (const UnsupportedPart& e) {
    say(fmt::format("logprobs-check: {}\n", e.what()));
    return kBadInput;
  } catch (const ShardError& e) {
    say(fmt::format("logprobs-check: {}\n", e.what()));
    return kBadInput;
  } catch (const CampaignFileError& e) {
    say(fmt::format("logprobs-check merge: {}\n", e.what()));
    return kBadInput;
  } catch (const MergeError& e) {
    say(fmt::format("logprobs-check merge: {}\n", e.what()));
    return kBadInput;
  } catch (const OutputFileError& e) {
    say(fmt::format("logprobs-check: {}\n", e.what()));
    return kBadInput;
  } catch (const MemoryBudgetExceeded& e) {
    say(fmt::format("logprobs-check: {} (--memory-budget BYTES sets the budget)\n", e.what()));
    return kBadInput;
  } catch (const std::system_error& e) {  // the machine refused (a full disk, a closed stdout): no verdict
    say(fmt::format("logprobs-check: {}\n", e.what()));
    return kBadInput;
  } catch (const std::exception& e) {
    // Neither a verdict nor the user's fault (a generator bug, a full disk): still not a pass.
    say(fmt::format("logprobs-check: internal error: {}\n", e.what()));
    return kBadInput;
  }
  return kBadInput;
}

}  // namespace
}  // namespace logprobs::cli

// The campaign allocates, fills and frees a result per backend, case and K: at K = 65535 a few
// MB to a GB each, 80% of its time. glibc gave each back to the kernel when freed (an mmap'd
// chunk, or the top of a heap past the trim threshold), so the next one's pages faulted in and
// were zeroed again: 10.9 of the 30.7 s the campaign spends at K = 65535 were the kernel's.
// Kept in the process (and each heap grown 256 MB at a time), they are reused: the default
// campaign (--seed 1 --cases 100) 38.0 -> 18.8 s.
// The peak resident size is the same; a command that ends soon does not need to give memory back.
static void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: larger blocks are still mapped alone
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
#endif
}

// A verdict printed to nowhere is no verdict: output that could not be written (a full disk,
// /dev/full, a closed pipe) makes the exit status 2, whatever the command found. SIGPIPE is
// ignored so that a reader gone away is such a failed write, said on stderr, instead of a death by
// signal (exit 141) that a CI log shows as nothing.
int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  keep_freed_memory();
  int status = logprobs::cli::run_main(argc, argv);
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    logprobs::cli::say(fmt::format("logprobs-check: cannot write the standard output: {}\n", std::strerror(errno)));
    status = logprobs::cli::kBadInput;
  }
  return status;
}
