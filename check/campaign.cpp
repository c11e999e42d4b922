#include "campaign.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>
#include <utility>

#include "fuzz/generators.hpp"
#include "fuzz/hand_cases.hpp"
#include "harness/batch_file.hpp"

namespace logprobs {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// RapidCheck sizes run 0..100; cycling through them mixes small cases (quick, readable) with
// large ones (real vocab sizes, many items).
int case_size(std::uint64_t index) { return static_cast<int>(index % 101); }

// The case a random index draws; find_counterexample draws the same one from the same seed and size.
std::optional<BatchData> draw_case(std::uint64_t seed, int size) {
  try {
    return gen::batch()(rc::Random(seed), size).value();
  } catch (const rc::GenerationFailure&) {
    return std::nullopt;  // the generator gave up on this seed; the campaign moves on
  }
}

std::string file_safe(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  return text;
}

// Where a failing case came from: a hand case (written as it is) or a random one (shrunk from
// its seed and size), and whether ranks were asked for.
struct Origin {
  std::string text;
  std::optional<std::pair<std::uint64_t, int>> random;  // (case seed, size)
  bool ranks = false;
};

class Campaign {
 public:
  Campaign(const CampaignOptions& options, std::ostream& log) : options_(options), log_(log), start_(Clock::now()) {
    for (const Backend* backend : options.backends)
      for (std::uint32_t k : options.ks) report_.cells.emplace_back(std::string(backend->name()), k);
  }

  CampaignReport run() {
    // Hand cases with and without ranks; each random case asks for them or not by its seed.
    const std::vector<HandCase> hands = hand_cases();
    for (std::size_t h = 0; h < hands.size(); ++h) {
      if (!options_.shard.owns(h)) continue;
      for (const bool ranks : {false, true})
        run_case(hands[h].batch,
                 {"hand case '" + hands[h].name + "'" + (ranks ? " with ranks" : ""), std::nullopt, ranks});
      ++report_.hand_cases;
      show_progress(false);
    }
    for (std::uint64_t index = options_.shard.index; more_random_cases(index); index += options_.shard.count) {
      const std::uint64_t seed = case_seed(options_.seed, index);
      const int size = case_size(index);
      const bool ranks = (seed >> 63) != 0;
      if (const std::optional<BatchData> batch = draw_case(seed, size))
        run_case(*batch, {fmt::format("random case {} (case seed {}, size {}{})", index, seed, size,
                                      ranks ? ", with ranks" : ""),
                          std::pair{seed, size}, ranks});
      ++report_.random_cases;
      show_progress(false);
    }
    show_progress(true);
    report_.elapsed_s = seconds_since(start_);
    return std::move(report_);
  }

 private:
  bool more_random_cases(std::uint64_t index) {
    if (options_.max_cases && index >= *options_.max_cases) return false;
    if (seconds_since(start_) < options_.time_budget_s) return true;
    report_.stopped_by_time = true;
    return false;
  }

  CellSummary& cell(std::size_t backend_index, std::size_t k_index) {
    return report_.cells[backend_index * options_.ks.size() + k_index];
  }

  void run_case(const BatchData& batch, const Origin& origin) {
    for (std::size_t i = 0; i < options_.ks.size(); ++i) {
      const std::uint32_t k = options_.ks[i];
      ResultData reference;
      try {
        reference = run_backend(reference_backend(), batch, k);
      } catch (const InvalidBatch& e) {  // the cases are valid by construction; say whose bug it is
        throw std::logic_error(fmt::format("{} is invalid at K = {}: {}", origin.text, k, e.what()));
      }
      // Backends that claim SPEC §8 are held to the canonical backend's bits.
      const std::optional<ResultData> canonical = canonical_result(options_.backends, batch, k, origin.ranks);
      JudgedResults judged;
      for (std::size_t b = 0; b < options_.backends.size(); ++b) {
        const Backend& backend = *options_.backends[b];
        // Only the cell's first failure is reported, so only it is diagnosed.
        const Diagnose diagnosis = cell(b, i).first_failure.empty() ? Diagnose::when_failing : Diagnose::no;
        const BackendOutcome outcome = judge_backend(backend, batch, k, origin.ranks, reference, options_.tolerance,
                                                     canonical ? &*canonical : nullptr, diagnosis,
                                                     {.max_kept = kFirstViolations}, &judged);
        cell(b, i).add(outcome);
        if (!outcome.ok()) {
          cell(b, i).note_failure(origin.text, outcome);
          on_failure(backend, k, batch, origin);
        }
      }
    }
  }

  // The outcome of `backend` on `batch` as the campaign judges it (diagnosed when asked: the
  // shrinker only asks whether it fails).
  BackendOutcome judged(const Backend& backend, const BatchData& batch, std::uint32_t k, bool ranks,
                        Diagnose diagnosis) const {
    const Backend* const alone[] = {&backend};
    const std::optional<ResultData> canonical = canonical_result(alone, batch, k, ranks);
    return judge_backend(backend, batch, k, ranks, run_backend(reference_backend(), batch, k), options_.tolerance,
                         canonical ? &*canonical : nullptr, diagnosis, {.max_kept = kFirstViolations});
  }

  void on_failure(const Backend& backend, std::uint32_t k, const BatchData& batch, const Origin& origin) {
    const auto key = std::pair{std::string(backend.name()), k};
    if (shrunk_.contains(key) || static_cast<int>(report_.counterexamples.size()) >= options_.max_counterexamples)
      return;
    shrunk_.insert(key);
    show_progress(true);

    CounterexampleFile file;
    file.backend = key.first;
    file.k = k;
    file.ranks = origin.ranks;
    file.origin = origin.text;
    BatchData smallest = batch;
    if (origin.random) {
      const auto fails = [&](const BatchData& candidate) {
        return !judged(backend, candidate, k, origin.ranks, Diagnose::no).ok();
      };
      std::optional<gen::Counterexample> found = gen::find_counterexample(
          gen::batch(), origin.random->first, origin.random->second, fails, options_.max_shrink_tries);
      if (found) {
        smallest = std::move(found->batch);
        file.shrink_steps = found->shrink_steps;
      }
    }
    // Shards may share one --out-dir: each names its files.
    const std::string shard = options_.shard.sharded()
                                  ? fmt::format("-shard{}of{}", options_.shard.index, options_.shard.count)
                                  : std::string();
    file.path =
        options_.counterexample_dir / fmt::format("counterexample-{}-k{}{}-{}.safetensors", file_safe(file.backend), k,
                                                  shard, report_.counterexamples.size());
    file.replay_command =
        fmt::format("{} compare --input {} --k {}{} --backends {}{}", shell_word(options_.program),
                    shell_word(file.path.string()), k, origin.ranks ? " --ranks" : "", shell_word(file.backend),
                    tolerance_flags(options_.tolerance));
    // A file that cannot be written (a full disk) costs the replay file, never the verdict: the
    // failure is counted and reported all the same.
    BatchData replayed;
    try {
      std::filesystem::create_directories(options_.counterexample_dir);
      write_batch_file(file.path, smallest, k, {{"origin", origin.text}, {"backend", file.backend}});
      // Replayed from the file, as the printed command will: the file drops any row stride > V.
      replayed = read_batch_file(file.path).batch;
    } catch (const std::exception& e) {  // FileError, or create_directories' filesystem_error
      file.write_error = e.what();
      file.replay_command.clear();
      replayed = smallest;
    }

    const BackendOutcome outcome = judged(backend, replayed, k, origin.ranks, Diagnose::when_failing);
    file.reproduces = !outcome.ok();
    if (!outcome.error.empty()) file.first_violations.push_back("threw: " + outcome.error);
    if (!outcome.canonical_difference.empty()) file.first_violations.push_back(outcome.canonical_difference);
    for (std::size_t i = 0; i < outcome.verdict.violations.size() && file.first_violations.size() < kFirstViolations;
         ++i)
      file.first_violations.push_back(outcome.verdict.violations[i].message());
    file.diagnoses = outcome.diagnoses;

    fmt::print(log_, "FAIL {} at K = {} on {}\n", file.backend, k, origin.text);
    fmt::print(log_, "  shrunk in {} steps to B = {}, V = {}, {} output rows; {}\n", file.shrink_steps,
               smallest.sampled_tokens.size(), smallest.vocab, smallest.view().output_rows(),
               file.write_error.empty() ? "written to " + file.path.string() : "not written: " + file.write_error);
    for (const std::string& line : diagnosis_lines(file.diagnoses)) fmt::print(log_, "  {}\n", line);
    for (const std::string& v : file.first_violations) fmt::print(log_, "  {}\n", v);
    if (!file.reproduces) fmt::print(log_, "  (the written file does not reproduce the failure)\n");
    if (!file.replay_command.empty()) fmt::print(log_, "  replay: {}\n", file.replay_command);
    report_.counterexamples.push_back(std::move(file));
  }

  void show_progress(bool clear) {
    if (!options_.progress) return;
    if (clear) {
      if (progress_shown_) fmt::print(stderr, "\r\033[K");
      progress_shown_ = false;
      return;
    }
    const double now = seconds_since(start_);
    if (progress_shown_ && now - last_progress_ < 0.2) return;
    last_progress_ = now;
    progress_shown_ = true;
    fmt::print(stderr, "\r\033[K{:6.1f} s / {:g} s  {} hand + {} random cases  {} failures", now,
               options_.time_budget_s, report_.hand_cases, report_.random_cases, total_failures(report_.cells));
    std::fflush(stderr);
  }

  const CampaignOptions& options_;
  std::ostream& log_;
  Clock::time_point start_;
  CampaignReport report_;
  std::set<std::pair<std::string, std::uint32_t>> shrunk_;
  bool progress_shown_ = false;
  double last_progress_ = 0;
};

}  // namespace

CampaignReport run_campaign(const CampaignOptions& options, std::ostream& log) { return Campaign(options, log).run(); }

std::uint64_t case_seed(std::uint64_t seed, std::uint64_t index) {
  // splitmix64 of seed + index: neighbouring indices give unrelated seeds.
  std::uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace logprobs
