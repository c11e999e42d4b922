#include "campaign.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>
#include <utility>

#include "fuzz/generators.hpp"
#include "hand_cases.hpp"
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

class Campaign {
 public:
  Campaign(const CampaignOptions& options, std::ostream& log) : options_(options), log_(log), start_(Clock::now()) {
    for (const Backend* backend : options.backends)
      for (int levels : options.levels) report_.cells.emplace_back(std::string(backend->name()), levels);
  }

  CampaignReport run() {
    for (const HandCase& hand : hand_cases()) {
      run_case(
          hand.batch, [&] { return "hand case '" + hand.name + "'"; }, std::nullopt);
      ++report_.hand_cases;
      show_progress(false);
    }
    for (std::uint64_t index = 0; more_random_cases(index); ++index) {
      const std::uint64_t seed = case_seed(options_.seed, index);
      const int size = case_size(index);
      const std::optional<BatchData> batch = draw_case(seed, size);
      if (batch)
        run_case(
            *batch, [&] { return fmt::format("random case {} (case seed {}, size {})", index, seed, size); },
            std::pair{seed, size});
      ++report_.random_cases;
      show_progress(false);
    }
    show_progress(true);
    report_.elapsed_s = seconds_since(start_);
    return std::move(report_);
  }

 private:
  bool more_random_cases(std::uint64_t index) const {
    if (options_.max_cases && index >= *options_.max_cases) return false;
    return seconds_since(start_) < options_.time_budget_s;
  }

  CellSummary& cell(std::size_t backend_index, std::size_t levels_index) {
    return report_.cells[backend_index * options_.levels.size() + levels_index];
  }

  template <typename Origin>
  void run_case(const BatchData& batch, const Origin& origin, std::optional<std::pair<std::uint64_t, int>> random) {
    for (std::size_t l = 0; l < options_.levels.size(); ++l) {
      const int levels = options_.levels[l];
      ResultData reference;
      try {
        reference = run_backend(reference_backend(), batch, levels);
      } catch (const InvalidBatch& e) {  // the cases are valid by construction; say whose bug it is
        throw std::logic_error(fmt::format("{} is invalid at levels {}: {}", origin(), levels, e.what()));
      }
      for (std::size_t b = 0; b < options_.backends.size(); ++b) {
        const Backend& backend = *options_.backends[b];
        const BackendOutcome outcome = judge_backend(backend, batch, levels, reference, options_.tolerance);
        cell(b, l).add(outcome);
        if (!outcome.ok()) on_failure(backend, levels, batch, origin(), random);
      }
    }
  }

  void on_failure(const Backend& backend, int levels, const BatchData& batch, const std::string& origin,
                  std::optional<std::pair<std::uint64_t, int>> random) {
    const auto key = std::pair{std::string(backend.name()), levels};
    if (shrunk_.contains(key) || static_cast<int>(report_.counterexamples.size()) >= options_.max_counterexamples)
      return;
    shrunk_.insert(key);
    show_progress(true);

    const auto fails = [&](const BatchData& candidate) {
      const ResultData reference = run_backend(reference_backend(), candidate, levels);
      return !judge_backend(backend, candidate, levels, reference, options_.tolerance).ok();
    };
    CounterexampleFile file;
    file.backend = key.first;
    file.levels = levels;
    file.origin = origin;
    BatchData smallest = batch;
    if (random) {
      std::optional<gen::Counterexample> found =
          gen::find_counterexample(gen::batch(), random->first, random->second, fails, options_.max_shrink_tries);
      if (found) {
        smallest = std::move(found->batch);
        file.shrink_steps = found->shrink_steps;
      }
    }
    std::filesystem::create_directories(options_.counterexample_dir);
    file.path =
        options_.counterexample_dir / fmt::format("counterexample-{}-levels{}-{}.safetensors", file_safe(file.backend),
                                                  levels, report_.counterexamples.size());
    write_batch_file(file.path, smallest, levels, {{"origin", origin}, {"backend", file.backend}});
    file.replay_command = fmt::format("{} compare --input {} --levels {} --backends {}{}", options_.program,
                                      file.path.string(), levels, file.backend, tolerance_flags(options_.tolerance));

    // Replay from the file, as the printed command will: the file drops any row stride > V.
    const BatchData replayed = read_batch_file(file.path).batch;
    const BackendOutcome outcome = judge_backend(
        backend, replayed, levels, run_backend(reference_backend(), replayed, levels), options_.tolerance);
    file.reproduces = !outcome.ok();
    if (!outcome.error.empty()) file.first_violations.push_back("threw: " + outcome.error);
    for (std::size_t i = 0; i < outcome.verdict.violations.size() && file.first_violations.size() < 5; ++i)
      file.first_violations.push_back(outcome.verdict.violations[i].message());

    fmt::print(log_, "FAIL {} at levels {} on {}\n", file.backend, levels, origin);
    fmt::print(log_, "  shrunk in {} steps to B = {}, V = {}, {} output rows; written to {}\n", file.shrink_steps,
               smallest.sampled_tokens.size(), smallest.vocab, smallest.view().output_rows(), file.path.string());
    for (const std::string& v : file.first_violations) fmt::print(log_, "  {}\n", v);
    if (!file.reproduces) fmt::print(log_, "  (the written file does not reproduce the failure)\n");
    fmt::print(log_, "  replay: {}\n", file.replay_command);
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
  std::set<std::pair<std::string, int>> shrunk_;
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
