// The one report of logprobs-check: what each backend did at each K, as a table on the
// terminal and as a JSON document, for `campaign`, `compare` and `verify` alike; and the flags a
// replay line needs to reach the same verdict.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/judge.hpp"

namespace logprobs {

// What one backend (or one judged result file) did at one K over one or many cases.
struct CellSummary {
  CellSummary(std::string backend_, std::uint32_t k_) : backend(std::move(backend_)), k(k_) {}
  std::string backend;
  std::uint32_t k = 0;
  std::uint64_t cases = 0;             // cases judged
  std::uint64_t skipped = 0;           // cases needing an optional part the backend lacks (SPEC §4)
  std::set<std::string> skip_reasons;  // those parts
  std::uint64_t failures = 0;  // cases with a violation or a thrown error
  // The violations of its cases: all counted (and by rule), and those their verdicts kept.
  std::uint64_t violations = 0;
  std::uint64_t violations_kept = 0;
  std::array<std::uint64_t, kRuleCount> violations_by_rule{};
  ErrorStats stats;
  double seconds = 0;
  std::string first_failure;                  // where the first failing case came from
  std::vector<std::string> first_violations;  // its first violations (or what it threw)
  std::vector<Diagnosis> first_diagnoses;     // what the diagnosis names on it (diagnosis.hpp)
  void add(const BackendOutcome& outcome);
  // Records `outcome`, a failure, as the first one unless one is recorded already.
  void note_failure(const std::string& origin, const BackendOutcome& outcome);
};

std::uint64_t total_failures(std::span<const CellSummary> cells);

// How many violations a cell reports of its first failing case, and so how many the campaign's
// verdicts keep (all are counted).
inline constexpr std::size_t kFirstViolations = 5;

// A failing case, shrunk where it was random, written as a batch file that replays it.
struct CounterexampleFile {
  std::string backend;
  std::uint32_t k = 0;
  bool ranks = false;
  std::string origin;  // the hand case's name, or the random case's index, seed and size
  std::filesystem::path path;
  std::string replay_command;
  int shrink_steps = 0;
  std::vector<std::string> first_violations;  // of the written case
  std::vector<Diagnosis> diagnoses;           // what the diagnosis names on the written case
  bool reproduces = false;                    // the file, read back, still fails
  std::string write_error;                    // why the file could not be written (then no replay)
};

// The table: backend, K, cases judged and skipped, rows, largest absolute and ULP error,
// tolerance used and the kind of row it was reached on, failures, time; then, for each backend that skipped cases, the parts it lacks.
void print_table(std::ostream& os, std::span<const CellSummary> cells);

// What built this binary: the version, the commit (with "-dirty" for uncommitted changes), the
// compiler and the build type. Runs to be merged must share it.
nlohmann::json build_json();

// The report as JSON: the tool, its version, the contract's version, the build, the tolerance,
// every backend of the build, the command, one entry per cell and whether all passed. Callers add
// what is theirs (seed, input).
nlohmann::json report_json(std::string_view command, const Tolerance& tolerance, std::span<const CellSummary> cells);
nlohmann::json to_json(const CellSummary& cell);
nlohmann::json to_json(const CounterexampleFile& file);
// The inverses, for `merge`; nlohmann::json::exception when a field is missing or mistyped.
CellSummary cell_from_json(const nlohmann::json& json);
CounterexampleFile counterexample_from_json(const nlohmann::json& json);

// The diagnoses as reports write them, [{name, rows, evidence}], and back (nlohmann::json::exception
// when a field is missing, mistyped or not a class's name).
nlohmann::json diagnoses_json(std::span<const Diagnosis> diagnoses);
std::vector<Diagnosis> diagnoses_from_json(const nlohmann::json& json);
// "diagnosis: <name>: <evidence>", one line each: what a report prints first after its headline.
std::vector<std::string> diagnosis_lines(std::span<const Diagnosis> diagnoses);

// The tolerance as reports write it, and back (nlohmann::json::exception when a field is
// missing, mistyped or an unknown sum rule).
nlohmann::json tolerance_json(const Tolerance& tolerance);
Tolerance tolerance_from_json(const nlohmann::json& json);

// The command-line flags that set every tolerance option differing from the default, each
// value printed so that it reads back as the same double ("" when all are default).
std::string tolerance_flags(const Tolerance& tolerance);

// One word of a printed command, quoted for a POSIX shell where it needs it (a path with a space,
// a quote or a shell character), so that every replay line runs as pasted.
std::string shell_word(std::string_view word);

}  // namespace logprobs
