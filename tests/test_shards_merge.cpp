// Shards and merge end to end: three shards of one seed and --cases, run side by side, merged,
// give exactly the unsharded run's cases, rows, failures and error maxima; merge refuses each
// input that would make the sum a different run, exiting 2 and naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "command_runner.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;
using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;
using testing_support::path_of;
using testing_support::StartedCommand;

// A tolerance tight enough that some cells fail (cpu's) and some pass (max at K = 0), so verdicts
// are compared, not only zeros; max skips K = 5 altogether.
const std::string kRun =
    "campaign --seed 21 --cases 45 --k 0,5 --backends max,cpu --ulps 1 --norm-ulps 0 --sigma 0 --floor 0 --time 600";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string write_json(const std::string& name, const nlohmann::json& json) {
  const std::string path = path_of(name);
  std::ofstream(path) << json.dump();
  return path;
}

// Three processes side by side on a small machine: OpenMP's threads would only wait for cores.
const std::string kOneThread = "OMP_NUM_THREADS=1";

std::string shard_path(const std::string& run, int i) { return path_of(run + "-shard" + std::to_string(i) + ".json"); }

// The shards of `options` side by side, each writing its JSON report; their results.
std::vector<CommandResult> run_shards(const std::string& run, const std::string& options) {
  std::vector<std::unique_ptr<StartedCommand>> shards;
  for (int i = 0; i < 3; ++i)
    shards.push_back(std::make_unique<StartedCommand>(
        options + " --shard " + std::to_string(i) + "/3 --json " + shard_path(run, i) + " --out-dir " + path_of(run),
        kOneThread));
  std::vector<CommandResult> results;
  for (auto& shard : shards) results.push_back(shard->wait());
  return results;
}

TEST(ShardsAndMerge, ThreeShardsSideBySideMergeToExactlyTheUnshardedRun) {
  const CommandResult unsharded =
      logprobs_check(kRun + " --json " + path_of("unsharded.json") + " --out-dir " + path_of("whole"), kOneThread);
  ASSERT_EQ(unsharded.exit_code, 1) << "some cells fail at this tolerance: " << unsharded.output;
  for (const CommandResult& shard : run_shards("tight", kRun)) ASSERT_LE(shard.exit_code, 1) << shard.output;
  const CommandResult merge =
      logprobs_check("merge " + shard_path("tight", 0) + " " + shard_path("tight", 1) + " " + shard_path("tight", 2) +
                     " --json " + path_of("merged.json") + " --junit " + path_of("merged.xml"));
  ASSERT_EQ(merge.exit_code, unsharded.exit_code) << merge.output;

  const nlohmann::json whole = read_json(path_of("unsharded.json"));
  const nlohmann::json merged = read_json(path_of("merged.json"));
  EXPECT_EQ(merged["hand_cases"], whole["hand_cases"]);
  EXPECT_EQ(merged["random_cases"], whole["random_cases"]);
  EXPECT_EQ(whole["random_cases"], 45);
  EXPECT_EQ(merged["ok"], whole["ok"]);
  ASSERT_EQ(merged["results"].size(), whole["results"].size());
  int failing_cells = 0, skipped_cells = 0;
  for (std::size_t i = 0; i < whole["results"].size(); ++i) {
    const nlohmann::json &want = whole["results"][i], &got = merged["results"][i];
    for (const char* field : {"backend", "k", "cases", "skipped", "skip_reasons", "rows", "values", "failures",
                              "max_abs_error", "max_ulp_error", "max_tolerance_used"})
      EXPECT_EQ(got[field], want[field]) << field << " of " << want["backend"] << " K=" << want["k"];
    failing_cells += want["failures"].get<int>() > 0;
    skipped_cells += want["cases"].get<int>() == 0;
  }
  EXPECT_GT(failing_cells, 0);
  EXPECT_LT(failing_cells, static_cast<int>(whole["results"].size())) << "some cells should pass too";
  EXPECT_GT(skipped_cells, 0) << "max skips K = 5";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(read_json(shard_path("tight", i))["random_cases"], 15) << i;

  // Shards sharing one --out-dir write distinct counterexample files, each replayable.
  std::set<std::string> files;
  for (const auto& file : merged["counterexamples"]) {
    EXPECT_TRUE(fs::exists(file["file"].get<std::string>())) << file["file"];
    EXPECT_TRUE(contains(file["file"], "-shard")) << file["file"];
    files.insert(file["file"]);
  }
  EXPECT_GE(files.size(), 2u);
  EXPECT_EQ(files.size(), merged["counterexamples"].size());
  EXPECT_TRUE(contains(merge.output, "replay: ")) << merge.output;

  // The merged JUnit file counts a failure per failing cell and a skip per cell with no case.
  std::ifstream in(path_of("merged.xml"));
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(xml, "<testsuite name=\"logprobs-check campaign\" tests=\"" +
                                std::to_string(whole["results"].size()) + "\" failures=\"" +
                                std::to_string(failing_cells) + "\" errors=\"0\" skipped=\"" +
                                std::to_string(skipped_cells) + "\""))
      << xml.substr(0, 600);
}

// Shards of a quick passing run, made once per test process, for merge to refuse altered.
class MergeRefuses : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const CommandResult& shard : run_shards("quick", kQuick)) ASSERT_EQ(shard.exit_code, 0) << shard.output;
  }
  static inline const std::string kQuick = "campaign --seed 8 --cases 9 --k 0,3 --backends max";
  static std::string shard_path(int i) { return logprobs::shard_path("quick", i); }
  static void expect_refused(const std::string& files, const std::string& fragment) {
    const CommandResult merge = logprobs_check("merge " + files);
    EXPECT_EQ(merge.exit_code, 2) << files << "\n" << merge.output;
    EXPECT_TRUE(contains(merge.output, fragment)) << files << "\n" << merge.output;
  }
  // Shard 0 with `alter` applied, merged with shards 1 and 2.
  template <typename Alter>
  static void expect_altered_refused(const std::string& name, Alter alter, const std::string& fragment) {
    nlohmann::json json = read_json(shard_path(0));
    alter(json);
    expect_refused(write_json(name + ".json", json) + " " + shard_path(1) + " " + shard_path(2), fragment);
  }
};

TEST_F(MergeRefuses, NothingWhenTheShardsAreWhole) {
  const CommandResult merge = logprobs_check("merge " + shard_path(2) + " " + shard_path(0) + " " + shard_path(1));
  EXPECT_EQ(merge.exit_code, 0) << merge.output;
  EXPECT_TRUE(contains(merge.output, "3 shards of seed 8")) << merge.output;
}

TEST_F(MergeRefuses, DifferentSeeds) {
  expect_altered_refused(
      "seed", [](nlohmann::json& j) { j["seed"] = 22; }, "field 'seed' differs: 22 in");
}

TEST_F(MergeRefuses, DifferentOptions) {
  expect_altered_refused(
      "cases", [](nlohmann::json& j) { j["max_cases"] = 46; }, "field 'max_cases' differs");
  expect_altered_refused(
      "k",
      [](nlohmann::json& j) {
        j["k"] = {0, 5};
      },
      "field 'k' differs");
  expect_altered_refused(
      "ulps", [](nlohmann::json& j) { j["tolerance"]["ulps"] = 4; }, "field 'tolerance.ulps'");
  expect_altered_refused(
      "sum_rule", [](nlohmann::json& j) { j["tolerance"]["sum_rule"] = "sqrt"; }, "field 'tolerance.sum_rule'");
  expect_altered_refused(
      "floor", [](nlohmann::json& j) { j["tolerance"]["floor"] = 8; }, "field 'tolerance.floor'");
  expect_altered_refused(
      "backends", [](nlohmann::json& j) { j["backends_under_test"] = {"cpu"}; }, "field 'backends_under_test'");
}

TEST_F(MergeRefuses, DifferentBuilds) {
  expect_altered_refused(
      "build", [](nlohmann::json& j) { j["build"]["commit"] = "0123456789ab"; }, "field 'build.commit' differs");
  expect_altered_refused(
      "version", [](nlohmann::json& j) { j["version"] = "0.0.9"; }, "field 'version' differs");
}

TEST_F(MergeRefuses, DifferentContractVersions) {
  expect_altered_refused(
      "contract", [](nlohmann::json& j) { j["contract_version"] = 1; }, "field 'contract_version' differs");
}

TEST_F(MergeRefuses, AShardGivenTwice) {
  expect_refused(shard_path(0) + " " + shard_path(1) + " " + shard_path(1) + " " + shard_path(2),
                 "field 'shard' is 1/3 in both");
}

TEST_F(MergeRefuses, AMissingShard) {
  expect_refused(shard_path(0) + " " + shard_path(2), "field 'shard': shard 1 of 3 missing");
}

TEST_F(MergeRefuses, AFileThatIsNotACampaignReport) {
  std::ofstream(path_of("garbage.json")) << "{not json";
  expect_refused(path_of("garbage.json") + " " + shard_path(1), "garbage.json is not a campaign report: not JSON");
  const std::string verify = write_json("verify.json", {{"tool", "logprobs-check"}, {"command", "verify"}});
  expect_refused(verify, "is not a campaign report: field 'command' is \"verify\"");
  expect_refused(write_json("array.json", nlohmann::json::array()), "is not a campaign report: field 'tool'");
  nlohmann::json old = read_json(shard_path(0));
  old.erase("shard");
  expect_refused(write_json("old.json", old), "field 'shard' is missing");
  expect_refused(path_of("no-such.json"), "no-such.json: cannot read");
}

TEST_F(MergeRefuses, AShardItsTimeBudgetCutShort) {
  const std::string cut = path_of("cut.json");
  const CommandResult shard =
      logprobs_check(kQuick + " --shard 1/3 --time 0 --json " + cut + " --out-dir " + path_of("cut"));
  ASSERT_EQ(shard.exit_code, 0) << shard.output;
  EXPECT_TRUE(contains(shard.output, "the time budget ended the random cases before --cases 9 did")) << shard.output;
  expect_refused(shard_path(0) + " " + cut + " " + shard_path(2), "field 'complete' is false in " + cut);
}

TEST(Shards, ShardNeedsCasesAndAutoNeedsAnEngine) {
  const CommandResult no_cases = logprobs_check("campaign --shard 0/2 --seed 1 --k 0");
  EXPECT_EQ(no_cases.exit_code, 2) << no_cases.output;
  EXPECT_TRUE(contains(no_cases.output, "--shard needs --cases N")) << no_cases.output;
  const std::string clean_env =
      "env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX -u CI_NODE_INDEX -u LOGPROBS_SHARD_INDEX";
  const CommandResult no_engine = logprobs_check("campaign --shard auto --cases 4 --k 0", clean_env);
  EXPECT_EQ(no_engine.exit_code, 2) << no_engine.output;
  EXPECT_TRUE(contains(no_engine.output, "--shard auto found no shard in the environment")) << no_engine.output;
}

TEST(Shards, AutoReadsASlurmArrayTask) {
  const std::string json = path_of("slurm.json");
  const CommandResult run = logprobs_check(
      "campaign --shard auto --cases 6 --seed 4 --k 0 --backends max --json " + json + " --out-dir " + path_of("slurm"),
      "env -u JOB_COMPLETION_INDEX -u CI_NODE_INDEX -u LOGPROBS_SHARD_INDEX SLURM_ARRAY_TASK_ID=5 "
      "SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_COUNT=3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "shard 1/3 (SLURM_ARRAY_TASK_ID=5")) << run.output;
  const nlohmann::json report = read_json(json);
  EXPECT_EQ(report["shard"]["index"], 1);
  EXPECT_EQ(report["shard"]["count"], 3);
  EXPECT_EQ(report["random_cases"], 2) << "cases 1 and 4 of 0..5";
}

}  // namespace
}  // namespace logprobs
