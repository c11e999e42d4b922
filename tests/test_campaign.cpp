// The campaign (check/campaign.hpp) as a library: its hand cases, and its failure path with a
// backend that has a planted bug: shrunk, written, replayable with the options that failed it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "check/campaign.hpp"
#include "check/hand_cases.hpp"
#include "harness/batch_file.hpp"
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
