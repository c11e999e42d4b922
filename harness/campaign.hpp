// The campaign: every backend under test against the reference at several levels, on the hand
// cases and then on random batches for a time budget; and the per-(backend, levels) summaries
// that `logprobs-check campaign` and `compare` print as a table and as JSON.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comparator.hpp"

namespace logprobs {

// The levels a campaign covers unless told otherwise: each K = 2^levels - 1 regime (none, one,
// a few, a heap that spills registers, thousands, the SPEC's maximum).
inline const std::vector<int> kCampaignLevels = {0, 1, 2, 3, 5, 8, 12, 16};

// One backend at one levels on one batch, judged against the reference's result.
struct BackendOutcome {
  Verdict verdict;
  std::string error;   // what the backend threw, if it threw (then verdict is empty)
  double seconds = 0;  // time spent in the backend's run()
  bool ok() const { return error.empty() && verdict.ok(); }
};

BackendOutcome judge_backend(const Backend& backend, const BatchData& batch, int levels, const ResultData& reference,
                             const Tolerance& tolerance);

// What one backend did at one levels over many cases.
struct CellSummary {
  CellSummary(std::string backend_, int levels_) : backend(std::move(backend_)), levels(levels_) {}
  std::string backend;
  int levels = 0;
  std::uint64_t cases = 0;
  std::uint64_t failures = 0;  // cases with a violation or a thrown error
  ErrorStats stats;
  double seconds = 0;
  void add(const BackendOutcome& outcome);
};

// A failing case, shrunk where it was random, written as a batch file that replays it.
struct CounterexampleFile {
  std::string backend;
  int levels = 0;
  std::string origin;  // the hand case's name, or the random case's index, seed and size
  std::filesystem::path path;
  std::string replay_command;
  int shrink_steps = 0;
  std::vector<std::string> first_violations;  // of the written case
  bool reproduces = false;  // the file, read back, still fails
};

struct CampaignOptions {
  std::vector<const Backend*> backends;  // under test, each judged against the reference
  std::vector<int> levels = kCampaignLevels;
  double time_budget_s = 60;                // for the random cases; the hand cases always run
  std::optional<std::uint64_t> max_cases;   // random cases at most
  std::uint64_t seed = 0;
  Tolerance tolerance;
  std::filesystem::path counterexample_dir = ".";
  int max_counterexamples = 4;  // files written at most (the first failure of each backend and levels)
  int max_shrink_tries = 2000;
  std::string program = "logprobs-check";  // how the replay command names this tool
  bool progress = false;                    // a progress line on stderr (for a terminal)
};

struct CampaignReport {
  std::vector<CellSummary> cells;  // backend by backend, levels in the options' order
  std::uint64_t hand_cases = 0;
  std::uint64_t random_cases = 0;
  double elapsed_s = 0;
  std::vector<CounterexampleFile> counterexamples;
  std::uint64_t failures() const;
};

// Runs the campaign. Writes a line per counterexample to `log` as it is found.
CampaignReport run_campaign(const CampaignOptions& options, std::ostream& log);

// The table: backend, levels, cases, rows, largest absolute and ULP error, failures, time.
void print_table(std::ostream& os, std::span<const CellSummary> cells);

nlohmann::json to_json(const CellSummary& cell);
nlohmann::json to_json(const CounterexampleFile& file);

// Where the tool and its backends stand, for JSON reports: version, tolerance, backends.
nlohmann::json report_metadata(const Tolerance& tolerance);

// The seed of random case `index` of a campaign with `seed`.
std::uint64_t case_seed(std::uint64_t seed, std::uint64_t index);

}  // namespace logprobs
