// The logprobs-check command end to end: the built binary, run as a user would.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "fuzz/hand_cases.hpp"
#include "command_runner.hpp"
#include "harness/batch_file.hpp"
#include "malformed_files.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;

using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;
using testing_support::path_of;
using testing_support::temp_dir;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Three output rows at K = 3: row 0 and row 2 have more candidates than K, row 1
// has two candidates (tokens 1 and 4), so one padding slot.
BatchData cli_batch() {
  BatchData b;
  b.vocab = b.row_stride = 8;
  b.rows = 3;
  b.logits = {0.5f, -1.f,  2.f,   1.5f,  -3.f, 0.f,   0.25f, -0.5f,  //
              -kInf, 1.f,  -kInf, -kInf, 0.f,  -kInf, -kInf, -kInf,  //
              3.f,  1.f,   2.f,   0.f,   -1.f, -2.f,  4.f,   0.5f};
  b.tokens = {6, 1};
  b.sampled_tokens = {4, 6};
  b.logit_row_offsets = {0, 2, 3};
  b.token_row_offsets = {0, 2, 2};
  b.lp_output_offsets = {0, 2, 3};
  return b;
}
constexpr std::uint32_t kCliK = 3;

// A batch file (K in its metadata) and the `max` backend's result file for it, made once.
class LogprobsCheckCli : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    write_batch_file(batch_path(), cli_batch(), kCliK);
    const CommandResult run =
        logprobs_check("run --backend max --input " + batch_path() + " --output " + result_path());
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  static std::string batch_path() { return path_of("cli_batch.safetensors"); }
  static std::string result_path() { return path_of("cli_result.safetensors"); }

  // verify on the `max` result after `plant` altered it.
  template <typename Plant>
  CommandResult verify_planted(const std::string& name, Plant plant) {
    ResultData result = read_result_file(result_path()).packed;
    plant(result);
    const std::string planted = path_of(name + ".safetensors");
    write_result_file(planted, result);
    return logprobs_check("verify --input " + batch_path() + " --result " + planted);
  }
};

// The slot of `row` (0..K-1) holding `token`, or K if none does.
std::uint64_t slot_of(const ResultData& r, std::uint64_t row, std::uint32_t token) {
  const std::uint64_t k = r.width - 1;
  for (std::uint64_t s = 0; s < k; ++s)
    if (r.token(row, s) == token) return s;
  return k;
}

TEST_F(LogprobsCheckCli, RunThenVerifyPasses) {
  const ResultFile file = read_result_file(result_path());
  EXPECT_EQ(file.packed.rows, 3u);
  EXPECT_EQ(file.packed.width, 4u);
  EXPECT_EQ(file.metadata.at("backend"), "max");
  const CommandResult verify = logprobs_check("verify --input " + batch_path() + " --result " + result_path());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_TRUE(contains(verify.output, "3 output rows")) << verify.output;
  EXPECT_TRUE(contains(verify.output, "OK: every result agrees with the reference")) << verify.output;
}

TEST_F(LogprobsCheckCli, VerifyWritesTheSameJsonReportAsCompare) {
  const std::string json_path = path_of("verify.json");
  const CommandResult verify =
      logprobs_check("verify --input " + batch_path() + " --result " + result_path() + " --json " + json_path);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  std::ifstream in(json_path);
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["command"], "verify");
  EXPECT_EQ(json["result"], result_path());
  EXPECT_EQ(json["k"], kCliK);
  EXPECT_EQ(json["ok"], true);
  ASSERT_EQ(json["results"].size(), 1u);
  EXPECT_EQ(json["results"][0]["backend"], "max") << "the producer recorded in the result's metadata";
  EXPECT_EQ(json["results"][0]["rows"], 3);
}

TEST_F(LogprobsCheckCli, WrongTokenFails) {
  // Row 2's top three are tokens 6, 0, 2 (logits 4, 3, 2); token 7 (logit 0.5) is not among them.
  const CommandResult verify = verify_planted("wrong_token", [](ResultData& r) {
    const std::uint64_t s = slot_of(r, 2, 2);
    ASSERT_LT(s, 3u);
    r.lp_tokens[2 * r.width + s] = 7;
  });
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(contains(verify.output, "output row 2")) << verify.output;
  EXPECT_TRUE(contains(verify.output, "token got 7")) << verify.output;
}

TEST_F(LogprobsCheckCli, ValueOffFails) {
  const CommandResult verify = verify_planted("value_off", [](ResultData& r) { r.lp_logits[0 * r.width + 3] += 0.01f; });
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(contains(verify.output, "output row 0, slot 3")) << verify.output;
  EXPECT_TRUE(contains(verify.output, "value off by")) << verify.output;
}

TEST_F(LogprobsCheckCli, NanForANumberFails) {
  const CommandResult verify = verify_planted("nan", [](ResultData& r) {
    r.lp_logits[2 * r.width + 0] = std::numeric_limits<float>::quiet_NaN();
  });
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(contains(verify.output, "output row 2, slot 0")) << verify.output;
  EXPECT_TRUE(contains(verify.output, "got nan")) << verify.output;
}

TEST_F(LogprobsCheckCli, WrongPaddingCountFails) {
  // Row 1 has candidates 1 and 4 and one padding slot; turning token 4's slot into padding
  // makes two.
  const CommandResult verify = verify_planted("padding", [](ResultData& r) {
    const std::uint64_t s = slot_of(r, 1, 4);
    ASSERT_LT(s, 3u);
    r.lp_tokens[1 * r.width + s] = 8;
    r.lp_logits[1 * r.width + s] = -kInf;
  });
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_TRUE(contains(verify.output, "output row 1")) << verify.output;
  EXPECT_TRUE(contains(verify.output, "padding count got 2 want 1")) << verify.output;
}

TEST_F(LogprobsCheckCli, ReorderedTopSlotsPass) {
  const CommandResult verify = verify_planted("reordered", [](ResultData& r) {
    for (std::uint64_t row = 0; row < r.rows; ++row) {
      std::reverse(r.lp_logits.begin() + row * r.width, r.lp_logits.begin() + row * r.width + 3);
      std::reverse(r.lp_tokens.begin() + row * r.width, r.lp_tokens.begin() + row * r.width + 3);
    }
  });
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
}

// A replay line runs as pasted, whatever the paths hold (a space, a quote): here from JUnit XML.
TEST_F(LogprobsCheckCli, ReplayLinesQuoteTheirPaths) {
  const fs::path folder = fs::path(temp_dir()) / "a folder's name";
  fs::create_directories(folder);
  fs::copy_file(batch_path(), folder / "the batch.safetensors", fs::copy_options::overwrite_existing);
  ResultData result = read_result_file(result_path()).packed;
  result.lp_logits[3] += 0.01f;
  write_result_file(folder / "the result.safetensors", result);
  const std::string junit = (folder / "report.xml").string();
  const CommandResult verify = testing_support::run_shell(
      std::string("'") + LOGPROBS_CHECK_PATH + "' verify --input \"" + (folder / "the batch.safetensors").string() +
      "\" --result \"" + (folder / "the result.safetensors").string() + "\" --junit \"" + junit + "\" 2>&1");
  ASSERT_EQ(verify.exit_code, 1) << verify.output;
  std::stringstream xml;
  xml << std::ifstream(junit).rdbuf();
  std::string line = xml.str().substr(xml.str().find("replay: ") + 8);
  line = line.substr(0, line.find_first_of("<\n"));
  for (const auto& [entity, text] : {std::pair{"&apos;", "'"}, {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"},
                                     {"&amp;", "&"}})
    for (std::size_t at; (at = line.find(entity)) != std::string::npos;)
      line.replace(at, std::string(entity).size(), text);
  const CommandResult again = testing_support::run_shell(line + " 2>&1");
  EXPECT_EQ(again.exit_code, 1) << line << "\n" << again.output;
  EXPECT_TRUE(contains(again.output, "value off by")) << line << "\n" << again.output;
}

// An unwritable stderr loses the message, never the exit status (a handler's print threw, and the
// process died of SIGABRT).
TEST_F(LogprobsCheckCli, AFullOrClosedStandardErrorStillExitsTwo) {
  const std::string check = std::string("'") + LOGPROBS_CHECK_PATH + "' ";
  for (const std::string& command : {check + "verify --input missing --result x 2>/dev/full",
                                     check + "merge " + path_of("s0.json") + " 2>&-", check + "run >&- 2>&-"}) {
    const CommandResult result = testing_support::run_shell(command);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.output;
  }
}

// A result of another K is the user's mistake, not the kernel's: exit 2, in the result's layout.
TEST_F(LogprobsCheckCli, ResultOfAnotherKIsAUsageError) {
  const CommandResult levels =
      logprobs_check("verify --levels 3 --input " + batch_path() + " --result " + result_path());
  EXPECT_EQ(levels.exit_code, 2) << levels.output;
  EXPECT_TRUE(contains(levels.output, "lp_logits is [3, 4]: K = 3, --levels 3 given (K = 7)")) << levels.output;
  const CommandResult k = logprobs_check("verify --k 5 --input " + batch_path() + " --result " + result_path());
  EXPECT_EQ(k.exit_code, 2) << k.output;
  EXPECT_TRUE(contains(k.output, "lp_logits is [3, 4]: K = 3, --k 5 given")) << k.output;
}

TEST_F(LogprobsCheckCli, VerifyTakesLevelsFromTheResultWhenTheBatchHasNone) {
  const std::string batch = path_of("verify_no_levels.safetensors");
  const std::string result = path_of("verify_no_levels_result.safetensors");
  write_batch_file(batch, cli_batch());
  const CommandResult run =
      logprobs_check("run --backend max --levels 1 --input " + batch + " --output " + result);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const CommandResult verify = logprobs_check("verify --input " + batch + " --result " + result);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_TRUE(contains(verify.output, "OK: every result agrees")) << verify.output;
}

TEST_F(LogprobsCheckCli, CompareWritesJson) {
  const std::string json_path = path_of("compare.json");
  const CommandResult compare =
      logprobs_check("compare --input " + batch_path() + " --backends max,reference --json " + json_path);
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  std::ifstream in(json_path);
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["command"], "compare");
  EXPECT_EQ(json["k"], kCliK);
  EXPECT_EQ(json["ok"], true);
  ASSERT_EQ(json["results"].size(), 2u);
  EXPECT_EQ(json["results"][0]["backend"], "max");
  EXPECT_EQ(json["results"][0]["rows"], 3);
  EXPECT_EQ(json["results"][0]["failures"], 0);
}

TEST_F(LogprobsCheckCli, BackendsListsEveryBackendWithItsAvailability) {
  const CommandResult backends = logprobs_check("backends");
  EXPECT_EQ(backends.exit_code, 0);
  std::istringstream lines(backends.output);
  std::map<std::string, std::string> availability;  // name -> "available" or "unavailable"
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, state;
    if (line.starts_with(" ") || !(words >> name >> state)) continue;  // a "why:" line
    availability[name] = state;
  }
  for (const Backend* b : all_backends()) {
    EXPECT_EQ(availability[std::string(b->name())], b->availability().available ? "available" : "unavailable")
        << backends.output;
  }
  EXPECT_EQ(availability["reference"], "available");
}

TEST_F(LogprobsCheckCli, BadUsageAndInvalidInputExitTwo) {
  const std::string input = " --input " + batch_path();
  const std::string out = " --output " + path_of("unused.safetensors");
  std::ofstream(path_of("garbage.safetensors")) << "not a safetensors file at all";
  write_batch_file(path_of("no_levels.safetensors"), cli_batch());
  BatchData invalid = cli_batch();
  invalid.sampled_tokens[1] = 8;  // == V
  write_batch_file(path_of("invalid.safetensors"), invalid, kCliK);

  const std::pair<std::string, std::string> cases[] = {
      {"no-such-subcommand", "unknown command 'no-such-subcommand' (commands: campaign, run, verify, compare, merge"},
      {"verfy" + input, "unknown command 'verfy'"},
      {"run --backend max" + input, "--output is required"},
      {"run --backend nosuch" + input + out, "unknown backend 'nosuch'"},
      {"run --backend max --levels 17" + input + out, "17"},
      {"run --backend max --input " + path_of("missing.safetensors") + out, "missing.safetensors: cannot read"},
      {"run --backend max" + input + " --output " + path_of("no/such/dir/out.safetensors"), "cannot create"},
      {"compare --input " + path_of("garbage.safetensors"), "header length"},
      {"compare --input " + path_of("no_levels.safetensors"), "neither --k nor --levels given"},
      {"compare --input " + path_of("invalid.safetensors"), "sampled_tokens[1] = 8 is not below vocab 8"},
      {"verify" + input + " --result " + path_of("garbage.safetensors"), "garbage.safetensors: header length"},
      {"--time 3 backends", "--time is an option of the campaign"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult result = logprobs_check(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, message)) << args << "\n" << result.output;
  }
}

// `run` on a bad input: exit 2 with the message, and no result file, not even a partial one.
void expect_run_rejects(const std::string& name, const std::string& input, const std::string& fragment) {
  const std::string output = path_of("rejected_" + name + ".safetensors");
  const CommandResult run = logprobs_check("run --backend max --levels 2 --input " + input + " --output " + output);
  EXPECT_EQ(run.exit_code, 2) << name << "\n" << run.output;
  EXPECT_TRUE(contains(run.output, fragment)) << name << "\n" << run.output;
  EXPECT_FALSE(fs::exists(output)) << name;
  for (const auto& entry : fs::directory_iterator(temp_dir()))
    EXPECT_EQ(entry.path().filename().string().find("rejected_" + name), std::string::npos)
        << "left behind: " << entry.path();
}

TEST(LogprobsCheckBadInput, EveryMalformedFileExitsTwoFromRun) {
  int i = 0;
  for (const testing_support::MalformedFile& file : testing_support::malformed_batch_files()) {
    const std::string path = path_of("malformed_" + std::to_string(i++) + ".safetensors");
    std::ofstream(path, std::ios::binary) << file.bytes;
    expect_run_rejects("malformed_" + std::to_string(i), path, file.fragment);
  }
}

// Each SPEC §4 rule that a batch file can break, one at a time, from cli_batch.
TEST(LogprobsCheckBadInput, EverySpec4RuleExitsTwoFromRun) {
  struct Broken {
    std::string name;
    void (*alter)(BatchData&);
    std::string fragment;
  };
  const Broken cases[] = {
      {"vocab_zero", [](BatchData& b) { b.vocab = b.row_stride = 0, b.logits.clear(); }, "vocab: must be at least 1"},
      {"offsets_length", [](BatchData& b) { b.logit_row_offsets = {0, 2}; }, "logit_row_offsets: length 2"},
      {"sampled_length", [](BatchData& b) { b.sampled_tokens = {4}; }, "sampled_tokens: length 1"},
      {"decreasing", [](BatchData& b) { b.lp_output_offsets = {0, 2, 1}; }, "batch 1: lp_output_offsets decreases"},
      {"first_output", [](BatchData& b) { b.lp_output_offsets = {1, 2, 3}; }, "lp_output_offsets[0]: must be 0, got 1"},
      {"logit_rows_past_end", [](BatchData& b) { b.logit_row_offsets = {0, 2, 4}; },
       "logit_row_offsets[2] = 4 exceeds the 3 logit rows"},
      {"tokens_past_end", [](BatchData& b) { b.token_row_offsets = {0, 2, 3}; },
       "token_row_offsets[2] = 3 exceeds the 2 tokens"},
      {"outputs_over_rows", [](BatchData& b) { b.logit_row_offsets = {0, 1, 3}; },
       "batch 0: 2 output rows but only 1 logit rows"},
      {"too_few_tokens", [](BatchData& b) { b.token_row_offsets = {0, 0, 2}; },
       "batch 0: 2 output rows but only 0 tokens"},
      {"sampled_token", [](BatchData& b) { b.sampled_tokens = {4, 8}; }, "sampled_tokens[1] = 8 is not below vocab 8"},
      {"read_token", [](BatchData& b) { b.tokens = {6, 9}; }, "tokens[1] = 9 (read for output row 0)"},
  };
  for (const Broken& broken : cases) {
    BatchData batch = cli_batch();
    broken.alter(batch);
    const std::string path = path_of("broken_" + broken.name + ".safetensors");
    write_batch_file(path, batch);
    expect_run_rejects(broken.name, path, broken.fragment);
  }
}

TEST(LogprobsCheckCampaign, ShortCampaignPassesAndWritesJson) {
  const std::string json_path = path_of("campaign.json");
  const CommandResult campaign = logprobs_check("campaign --cases 10 --time 2 --seed 7 --levels 0,3,16 --out-dir " +
                                                temp_dir().string() + " --json " + json_path);
  EXPECT_EQ(campaign.exit_code, 0) << campaign.output;
  EXPECT_TRUE(contains(campaign.output, "OK: every backend agrees")) << campaign.output;
  std::ifstream in(json_path);
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["seed"], 7);
  EXPECT_EQ(json["ok"], true);
  EXPECT_EQ(json["hand_cases"], hand_cases().size());
  EXPECT_LE(json["random_cases"].get<int>(), 10);
  std::size_t judged = 0;  // every available backend but the reference, at levels 0, 3, 16
  for (const Backend* backend : all_backends())
    judged += backend->name() != kReferenceName && backend->availability().available;
  ASSERT_EQ(json["results"].size(), 3 * judged);
  for (const auto& cell : json["results"]) EXPECT_EQ(cell["failures"], 0);
}

}  // namespace
}  // namespace logprobs
