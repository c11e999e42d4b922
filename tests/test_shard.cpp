// --shard I/N and --shard auto (check/shard.hpp): what each engine's variables give, and a clear
// refusal for every way they can be missing or inconsistent.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "check/shard.hpp"

namespace logprobs {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [env](const char* name) -> std::optional<std::string> {
    const auto found = env.find(name);
    return found == env.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
}

Shard parse(std::string_view spec, const Env& env = {}, std::optional<std::uint32_t> count = std::nullopt) {
  return parse_shard(spec, count, lookup(env));
}

// The message of the ShardError that parse throws.
std::string refusal(std::string_view spec, const Env& env = {}, std::optional<std::uint32_t> count = std::nullopt) {
  try {
    parse(spec, env, count);
  } catch (const ShardError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ShardError for --shard " << spec;
  return "";
}

void expect_shard(const Shard& shard, std::uint32_t index, std::uint32_t count) {
  EXPECT_EQ(shard.index, index) << shard.source;
  EXPECT_EQ(shard.count, count) << shard.source;
}

TEST(Shard, ExplicitIndexOverCount) {
  expect_shard(parse("0/1"), 0, 1);
  expect_shard(parse("2/3"), 2, 3);
  EXPECT_FALSE(parse("0/1").sharded());
  EXPECT_TRUE(parse("0/2").sharded());
}

TEST(Shard, OwnsEveryNthCaseSoShardsPartitionTheIndices) {
  const Shard shards[] = {parse("0/3"), parse("1/3"), parse("2/3")};
  for (std::uint64_t index = 0; index < 100; ++index) {
    int owners = 0;
    for (const Shard& s : shards) owners += s.owns(index);
    EXPECT_EQ(owners, 1) << index;
  }
  EXPECT_TRUE(shards[1].owns(4));
}

TEST(Shard, BadExplicitSpecsAreRefused) {
  EXPECT_NE(refusal("3/3").find("shard index 3 is not below the shard count 3"), std::string::npos);
  EXPECT_NE(refusal("0/0").find("the shard count must be 1.."), std::string::npos);
  for (const char* spec : {"1", "a/3", "1/b", "-1/3", "1/3/4", "", "/3", "1/"})
    EXPECT_NE(refusal(spec).find("--shard must be I/N"), std::string::npos) << spec;
  EXPECT_NE(refusal("1/3", {}, 3).find("--shard-count is for --shard auto"), std::string::npos);
}

TEST(Shard, AutoFromExplicitCiMatrixVariables) {
  expect_shard(parse("auto", {{"LOGPROBS_SHARD_INDEX", "1"}, {"LOGPROBS_SHARD_COUNT", "4"}}), 1, 4);
  EXPECT_NE(refusal("auto", {{"LOGPROBS_SHARD_INDEX", "1"}}).find("LOGPROBS_SHARD_COUNT is not set"),
            std::string::npos);
}

TEST(Shard, AutoFromASlurmArrayCountedFromItsSmallestId) {
  expect_shard(parse("auto", {{"SLURM_ARRAY_TASK_ID", "2"},
                              {"SLURM_ARRAY_TASK_COUNT", "3"},
                              {"SLURM_ARRAY_TASK_MIN", "0"},
                              {"SLURM_ARRAY_TASK_MAX", "2"}}),
               2, 3);
  // --array=1-3: ids 1, 2, 3 are shards 0, 1, 2.
  expect_shard(parse("auto", {{"SLURM_ARRAY_TASK_ID", "1"},
                              {"SLURM_ARRAY_TASK_COUNT", "3"},
                              {"SLURM_ARRAY_TASK_MIN", "1"},
                              {"SLURM_ARRAY_TASK_MAX", "3"}}),
               0, 3);
}

TEST(Shard, AutoRefusesASlurmArrayWithGapsOrAStep) {
  // --array=1,3,5: three tasks but not three consecutive ids.
  const std::string gaps = refusal("auto", {{"SLURM_ARRAY_TASK_ID", "3"},
                                            {"SLURM_ARRAY_TASK_COUNT", "3"},
                                            {"SLURM_ARRAY_TASK_MIN", "1"},
                                            {"SLURM_ARRAY_TASK_MAX", "5"}});
  EXPECT_NE(gaps.find("not 3 consecutive task ids"), std::string::npos) << gaps;
  EXPECT_NE(gaps.find("--array=0-2"), std::string::npos) << gaps;
  const std::string step = refusal("auto", {{"SLURM_ARRAY_TASK_ID", "0"},
                                            {"SLURM_ARRAY_TASK_COUNT", "2"},
                                            {"SLURM_ARRAY_TASK_MIN", "0"},
                                            {"SLURM_ARRAY_TASK_MAX", "2"},
                                            {"SLURM_ARRAY_TASK_STEP", "2"}});
  EXPECT_NE(step.find("STEP = 2"), std::string::npos) << step;
  EXPECT_NE(refusal("auto", {{"SLURM_ARRAY_TASK_ID", "0"}}).find("SLURM_ARRAY_TASK_COUNT is not set"),
            std::string::npos);
}

TEST(Shard, AutoFromAKubernetesIndexedJobNeedsTheCount) {
  expect_shard(parse("auto", {{"JOB_COMPLETION_INDEX", "3"}}, 5), 3, 5);
  expect_shard(parse("auto", {{"JOB_COMPLETION_INDEX", "3"}, {"LOGPROBS_SHARD_COUNT", "5"}}), 3, 5);
  const std::string message = refusal("auto", {{"JOB_COMPLETION_INDEX", "3"}});
  EXPECT_NE(message.find("JOB_COMPLETION_INDEX = 3 (a Kubernetes Indexed Job) but no shard count"), std::string::npos)
      << message;
  EXPECT_NE(refusal("auto", {{"JOB_COMPLETION_INDEX", "5"}}, 5).find("shard index 5 is not below the shard count 5"),
            std::string::npos);
}

// The case: the option and the variable naming different counts ran as shard 3/4.
TEST(Shard, AutoRefusesAKubernetesCountGivenTwiceDifferently) {
  expect_shard(parse("auto", {{"JOB_COMPLETION_INDEX", "3"}, {"LOGPROBS_SHARD_COUNT", "4"}}, 4), 3, 4);
  const std::string message = refusal("auto", {{"JOB_COMPLETION_INDEX", "3"}, {"LOGPROBS_SHARD_COUNT", "8"}}, 4);
  EXPECT_NE(message.find("--shard-count 4 disagrees with LOGPROBS_SHARD_COUNT = 8"), std::string::npos) << message;
}

TEST(Shard, AutoFromGitlabParallelNumberedFromOne) {
  expect_shard(parse("auto", {{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "3"}}), 0, 3);
  expect_shard(parse("auto", {{"CI_NODE_INDEX", "3"}, {"CI_NODE_TOTAL", "3"}}), 2, 3);
  EXPECT_NE(refusal("auto", {{"CI_NODE_INDEX", "0"}, {"CI_NODE_TOTAL", "3"}}).find("numbers parallel jobs from 1"),
            std::string::npos);
}

TEST(Shard, AutoRefusesAnEmptyEnvironmentNamingWhatItReads) {
  const std::string message = refusal("auto");
  for (const char* name : {"SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX", "CI_NODE_INDEX", "LOGPROBS_SHARD_INDEX"})
    EXPECT_NE(message.find(name), std::string::npos) << message;
}

TEST(Shard, AutoRefusesValuesThatAreNotWholeNumbers) {
  for (const char* value : {"x", "-1", "1.5", " 1", "0x2"}) {
    const std::string message = refusal("auto", {{"SLURM_ARRAY_TASK_ID", value}, {"SLURM_ARRAY_TASK_COUNT", "4"}});
    EXPECT_NE(message.find(std::string("SLURM_ARRAY_TASK_ID = '") + value + "' is not a whole number"),
              std::string::npos)
        << message;
  }
}

TEST(Shard, AutoAcceptsEnginesThatAgreeAndRefusesOnesThatDoNot) {
  expect_shard(parse("auto", {{"SLURM_ARRAY_TASK_ID", "1"},
                              {"SLURM_ARRAY_TASK_COUNT", "2"},
                              {"LOGPROBS_SHARD_INDEX", "1"},
                              {"LOGPROBS_SHARD_COUNT", "2"}}),
               1, 2);
  const std::string message = refusal(
      "auto",
      {{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}, {"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "2"}});
  EXPECT_NE(message.find("the environment names different shards"), std::string::npos) << message;
  EXPECT_NE(message.find("(1/2) but CI_NODE_INDEX=1 CI_NODE_TOTAL=2 (0/2)"), std::string::npos) << message;
  const std::string count = refusal("auto", {{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}, 3);
  EXPECT_NE(count.find("--shard-count 3 disagrees"), std::string::npos) << count;
}

}  // namespace
}  // namespace logprobs
