// The campaign (check/campaign.hpp) as a library: its hand cases, and its failure path with a
// backend that has a planted bug: shrunk, written, replayable with the options that failed it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "check/campaign.hpp"
#include "fuzz/hand_cases.hpp"
#include "harness/batch_file.hpp"
#include "harness/judge.hpp"
#include "temp_dir.hpp"

namespace logprobs {
namespace {

using testing_support::temp_dir;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(HandCases, AreValidAtEveryK) {
  for (const HandCase& hand : hand_cases())
    for (const std::uint32_t k : {0u, 1u, 5u, 20u, 255u, 4096u, kMaxK})
      EXPECT_NO_THROW(validate_batch(hand.batch.view(), k)) << hand.name << " at K = " << k;
}

// One hand case per optional part of contract v2 (SPEC §4), so a backend lacking one is skipped
// on a case a person can read, and one that claims it is judged on it.
TEST(HandCases, CoverEveryOptionalPart) {
  bool bf16 = false, f16 = false, temperatures = false;
  for (const HandCase& hand : hand_cases()) {
    bf16 |= hand.batch.dtype == LogitsDtype::bf16;
    f16 |= hand.batch.dtype == LogitsDtype::f16;
    temperatures |= hand.batch.temperatures.has_value();
  }
  EXPECT_TRUE(bf16 && f16 && temperatures);
}

// Right except that any batch with 6 or more output rows gets its last value nudged: no hand
// case has that many, so only random cases find it, and shrinking should stop near 6 rows.
class PlantedBugBackend final : public Backend {
 public:
  std::string_view name() const override { return "planted"; }
  std::string_view description() const override { return "the reference, wrong on batches of >= 6 output rows"; }
  Features features() const override { return Features::all(); }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    reference_backend().run(batch, k, out);
    if (out.rows >= 6) out.lp_logits[out.rows * out.width - 1] += 1.0f;
  }
};

// The reference with every finite value 3e-4 too high (a normalizer shift, which the diagnosis
// names), under names that give the same bits: one declares one f32 chain of sums, so it is
// judged by the linear rule (SPEC §5).
class Shifted final : public Backend {
 public:
  Shifted(std::string_view name, bool one_chain) : name_(name), one_chain_(one_chain) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "the reference, every value 3e-4 too high"; }
  Features features() const override { return Features::all(); }
  bool sums_in_one_chain() const override { return one_chain_; }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    reference_backend().run(batch, k, out);
    for (float& v : out.lp_logits)
      if (std::isfinite(v)) v += 3e-4f;
  }

 private:
  std::string_view name_;
  bool one_chain_;
};

// Everything of an outcome that a report shows.
std::string shown(const BackendOutcome& o) {
  std::ostringstream text;
  const Verdict& v = o.verdict;
  text << v.violation_count << " violations, " << v.stats.rows << " rows, " << v.stats.values << " values, "
       << v.stats.max_abs_error << " " << v.stats.max_ulp_error << " " << v.stats.max_tolerance_used << "\n";
  for (const std::uint64_t count : v.rule_counts) text << count << " ";
  for (const FailedRow& row : v.failed_rows) text << row.output_row << ":" << row.rules << " ";
  for (const Violation& violation : v.violations) text << "\n" << violation.message();
  for (const Diagnosis& d : o.diagnoses) text << "\n" << d.message();
  return text.str();
}

// A result judged again on the same case takes its first verdict (JudgedResults): the same as
// judging it anew, but only where the tolerance is the same too.
TEST(JudgedResults, AResultWithTheSameBitsTakesTheVerdictItWouldGet) {
  BatchData batch;
  batch.vocab = batch.row_stride = 300;
  batch.rows = 8;
  batch.logits.resize(batch.rows * batch.vocab);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& x : batch.logits) x = normal(rng);
  batch.sampled_tokens = {0, 1, 2, 3, 4, 5, 6, 7};
  batch.logit_row_offsets = batch.lp_output_offsets = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  batch.token_row_offsets = std::vector<std::uint32_t>(9, 0);
  const std::uint32_t k = 3;
  const ResultData reference = run_backend(reference_backend(), batch, k);
  const Shifted shifted("shifted", false), twin("shifted-twin", false), one_chain("shifted-one-chain", true);
  JudgedResults judged;
  for (const Backend* backend : std::initializer_list<const Backend*>{&shifted, &twin, &one_chain, &shifted}) {
    SCOPED_TRACE(backend->name());
    for (const Diagnose diagnosis : {Diagnose::no, Diagnose::when_failing}) {
      const BackendOutcome anew = judge_backend(*backend, batch, k, false, reference, {}, nullptr, diagnosis);
      ASSERT_FALSE(anew.ok());
      EXPECT_EQ(anew.diagnoses.empty(), diagnosis == Diagnose::no);
      EXPECT_EQ(shown(judge_backend(*backend, batch, k, false, reference, {}, nullptr, diagnosis, {}, &judged)),
                shown(anew));
    }
  }
  EXPECT_EQ(judged.size(), 2u) << "one result judged by each of two tolerances";
}

// The planted backend alone at K = 0, over at most 30 random cases from seed 11.
CampaignReport run_planted(const Tolerance& tolerance, const std::string& folder, std::ostringstream& log) {
  static const PlantedBugBackend planted;
  CampaignOptions options;
  options.backends = {&planted};
  options.ks = {0};
  options.max_cases = 30;
  options.time_budget_s = 30;
  options.seed = 11;
  options.tolerance = tolerance;
  options.counterexample_dir = temp_dir() / folder;
  return run_campaign(options, log);
}

TEST(LogprobsCheckCampaign, FailureIsShrunkWrittenAndReplayable) {
  std::ostringstream log;
  const CampaignReport report = run_planted(Tolerance{}, "counterexamples", log);

  ASSERT_GT(total_failures(report.cells), 0u) << "no random case had 6 output rows; " << log.str();
  EXPECT_EQ(report.cells[0].failures, total_failures(report.cells));
  ASSERT_EQ(report.counterexamples.size(), 1u);  // one file per (backend, K)
  const CounterexampleFile& file = report.counterexamples[0];
  EXPECT_TRUE(contains(file.origin, "random case")) << file.origin;
  EXPECT_TRUE(file.reproduces);
  EXPECT_GT(file.shrink_steps, 0);
  EXPECT_EQ(file.replay_command, "logprobs-check compare --input " + file.path.string() + " --k 0" +
                                     (file.ranks ? " --ranks" : "") + " --backends planted");
  const BatchFile written = read_batch_file(file.path);
  EXPECT_EQ(written.k, 0u);
  EXPECT_GE(written.batch.view().output_rows(), 6u);
  EXPECT_LE(written.batch.view().output_rows(), 8u) << "shrinking should come close to the 6 rows the bug needs";
  EXPECT_TRUE(contains(log.str(), "replay: " + file.replay_command)) << log.str();
}

// The replay line reaches the campaign's verdict: it carries every tolerance option that
// differs from the default (benchdnn's repro line), printed so that it reads back exactly.
TEST(LogprobsCheckCampaign, ReplayLineCarriesTheToleranceOptions) {
  std::ostringstream log;
  const CampaignReport report = run_planted({.ulps = 2, .norm_ulps = 3e-6, .sigma = 2}, "replay-tolerance", log);
  ASSERT_EQ(report.counterexamples.size(), 1u) << log.str();
  const std::string& replay = report.counterexamples[0].replay_command;
  EXPECT_TRUE(contains(replay, " --ulps 2 --norm-ulps 3e-06")) << replay;
  EXPECT_FALSE(contains(replay, "--sigma")) << "the default is left out: " << replay;
  EXPECT_EQ(tolerance_flags({.sum_rule = SumRule::linear, .sigma = 0.5}), " --sum-rule linear --sigma 0.5");
  EXPECT_EQ(tolerance_flags({.sum_rule = SumRule::sqrt, .floor = 0}), " --sum-rule sqrt --floor 0");
  EXPECT_EQ(tolerance_flags(Tolerance{}), "");
}

// A backend that claims SPEC §8 but is one ulp off the canonical bits in its first value: within
// every tolerance, so only the bit check can catch it.
class OneUlpOffCanonical final : public Backend {
 public:
  std::string_view name() const override { return "one-ulp-off"; }
  std::string_view description() const override { return "canonical, one ulp off in its first value"; }
  Features features() const override { return Features::all(); }
  bool claims_canonical_arithmetic() const override { return true; }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    find_backend(kCanonicalName)->run(batch, k, out);
    if (out.rows > 0 && std::isfinite(out.lp_logits[0])) out.lp_logits[0] = std::nextafter(out.lp_logits[0], 0.0f);
  }
};

TEST(LogprobsCheckCampaign, ABackendClaimingSpec8IsHeldToTheCanonicalBits) {
  const OneUlpOffCanonical off;
  CampaignOptions options;
  options.backends = {&off};
  options.ks = {0, 5};
  options.max_cases = 5;
  options.seed = 3;
  options.counterexample_dir = temp_dir() / "canonical";
  std::ostringstream log;
  const CampaignReport report = run_campaign(options, log);
  ASSERT_GT(total_failures(report.cells), 0u);
  EXPECT_TRUE(contains(log.str(), "SPEC §8: bits differ from the canonical arithmetic's at output row 0, slot 0"))
      << log.str();
  ASSERT_FALSE(report.counterexamples.empty());
  EXPECT_TRUE(report.counterexamples[0].reproduces) << "the written file fails the bit check again";
}

// A counterexample that cannot be written (here its folder would lie under a file; a full disk
// alike) costs the file, never the verdict: the failure is counted and the campaign goes on.
TEST(LogprobsCheckCampaign, ACounterexampleThatCannotBeWrittenKeepsTheVerdict) {
  std::ofstream(temp_dir() / "a-file") << "not a folder";
  std::ostringstream log;
  CampaignReport report;
  ASSERT_NO_THROW(report = run_planted(Tolerance{}, "a-file/counterexamples", log)) << log.str();
  EXPECT_GT(total_failures(report.cells), 0u) << log.str();
  ASSERT_EQ(report.counterexamples.size(), 1u) << log.str();
  EXPECT_TRUE(contains(log.str(), "not written: ")) << log.str();
  EXPECT_FALSE(contains(log.str(), "replay: ")) << "no file to replay: " << log.str();
}

}  // namespace
}  // namespace logprobs
