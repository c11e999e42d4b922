// Contract v2 through the command, as a kernel developer meets it: results with planted faults,
// judged by `logprobs-check verify` (a value off by 1e-4 at a real vocab size, a greedy-exact
// break of one ulp, a wrong rank, the split layout), and 16-bit batches and optional parts
// through `run` and `compare`.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <cmath>
#include <random>
#include <string>
#include <utility>

#include "command_runner.hpp"
#include "harness/batch_file.hpp"
#include "harness/half_precision.hpp"

namespace logprobs {
namespace {

using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;
using testing_support::path_of;

constexpr std::uint32_t kVocab = 128256;
constexpr std::uint32_t kK = 20;

// Two rows at V = 128256 shaped like a model's: the largest logit 14 (as in the row where the v1
// tolerance let an error of 3e-3 through), the second 13.95 (log-probability near -1), the rest an
// N(0, 2) tail holding about a third of the probability. Row 0 evaluates its top token (greedy),
// row 1 the second. (Where the tail is far below and the two top tokens hold nearly everything,
// honest f32 lane sums drift by more than 1e-4: tests/test_tolerance.cpp shows that row.)
BatchData llm_rows() {
  BatchData b;
  b.vocab = b.row_stride = kVocab;
  b.rows = 2;
  b.logits.resize(2 * kVocab);
  std::mt19937 rng(3);
  std::normal_distribution<float> sea(0.0f, 2.0f);
  for (float& x : b.logits) x = sea(rng);
  for (std::uint64_t r = 0; r < 2; ++r) {
    b.logits[r * kVocab + 100] = 14.0f;
    b.logits[r * kVocab + 7] = 13.95f;
  }
  b.sampled_tokens = {100, 7};
  b.logit_row_offsets = b.lp_output_offsets = {0, 1, 2};
  b.token_row_offsets = {0, 0, 0};
  return b;
}

// The slot of output row `row` holding `token` (K if none does).
std::uint64_t slot_of(const ResultData& r, std::uint64_t row, std::uint32_t token) {
  for (std::uint64_t s = 0; s + 1 < r.width; ++s)
    if (r.token(row, s) == token) return s;
  return r.width - 1;
}

class VerifyPlanted : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    write_batch_file(batch_path(), llm_rows(), kK);
    const CommandResult run = logprobs_check("run --backend reference --ranks --input " + batch_path() + " --output " +
                                             path_of("verify_planted_reference.safetensors"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  static std::string batch_path() { return path_of("verify_planted_batch.safetensors"); }
  static ResultData reference() { return read_result_file(path_of("verify_planted_reference.safetensors")).packed; }

  // `verify` of `result` (written in the packed layout) with extra arguments.
  static CommandResult verify(const ResultData& result, const std::string& name, const std::string& extra = "") {
    const std::string path = path_of("verify_planted_" + name + ".safetensors");
    write_result_file(path, result);
    return logprobs_check("verify --input " + batch_path() + " --result " + path + extra);
  }
  static CommandResult verify(const SplitResult& result, const std::string& name) {
    const std::string path = path_of("verify_planted_" + name + ".safetensors");
    write_split_result_file(path, result);
    return logprobs_check("verify --input " + batch_path() + " --result " + path);
  }
};

TEST_F(VerifyPlanted, TheReferencePassesWithRanks) {
  const ResultData ref = reference();
  ASSERT_TRUE(ref.ranks);
  EXPECT_EQ(ref.lp_ranks, (std::vector<std::uint32_t>{1, 2}));
  const CommandResult result = verify(ref, "unchanged");
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// SPEC §5 v2: at V = 128256 the old summation term (V * 2^-24 = 7.6e-3) let this through.
TEST_F(VerifyPlanted, AValueOffBy1e4NearMinusOneFailsByDefault) {
  ResultData planted = reference();
  const std::uint64_t second = slot_of(planted, 0, 7);  // row 0's second token
  ASSERT_LT(second, kK);
  ASSERT_NEAR(planted.value(0, second), -1.0, 0.1);
  planted.lp_logits[0 * planted.width + second] += 1e-4f;
  const CommandResult strict = verify(planted, "off_1e4");
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_TRUE(contains(strict.output, "output row 0, slot " + std::to_string(second) + ": token 7")) << strict.output;
  EXPECT_TRUE(contains(strict.output, "value off by")) << strict.output;
  const CommandResult one_chain = verify(planted, "off_1e4_linear", " --linear-sum");
  EXPECT_EQ(one_chain.exit_code, 0) << "V * 2^-24 admits it: " << one_chain.output;
}

// Each violation says which rule judged and what its row's summation term was; the report's JSON
// names the rule; `tolerance` prints the row's terms.
TEST_F(VerifyPlanted, AViolationSaysWhatJudgedIt) {
  ResultData planted = reference();
  planted.lp_logits[0 * planted.width + slot_of(planted, 0, 7)] += 1e-4f;
  const std::string json = path_of("verify_planted_rule.json");
  const CommandResult calibrated = verify(planted, "off_1e4_rule", " --json " + json);
  EXPECT_EQ(calibrated.exit_code, 1) << calibrated.output;
  EXPECT_TRUE(contains(calibrated.output, "by the calibrated rule, dev ")) << calibrated.output;
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(report.at("contract_version"), 3);
  EXPECT_EQ(report.at("tolerance"),
            nlohmann::json({{"ulps", 4}, {"norm_ulps", 4}, {"sum_rule", "calibrated"}, {"sigma", 2}, {"floor", 8}}));
  EXPECT_EQ(report.at("results").at(0).at("max_tolerance_row").at("sum_rule"), "calibrated");
  const CommandResult v2 = verify(planted, "off_1e4_sqrt", " --sum-rule sqrt");
  EXPECT_EQ(v2.exit_code, 1) << "v2's rule rejected it too: " << v2.output;
  EXPECT_TRUE(contains(v2.output, "by the sqrt rule)")) << v2.output;

  const CommandResult terms = logprobs_check("tolerance --input " + batch_path() + " --row 0");
  EXPECT_EQ(terms.exit_code, 0) << terms.output;
  for (const char* part : {"by the calibrated sum rule", "L =    4 lanes", "L = 1024 lanes", "(dev)",
                           "sum_err = max(sigma x dev, floor x 2^-24)", "norm_ulps x ulp(|m| + log V)"})
    EXPECT_TRUE(contains(terms.output, part)) << part << " in\n" << terms.output;
  const CommandResult sqrt_terms = logprobs_check("tolerance --input " + batch_path() + " --row 0 --sum-rule sqrt");
  EXPECT_TRUE(contains(sqrt_terms.output, "sigma x sqrt(V) x 2^-24")) << sqrt_terms.output;
  EXPECT_EQ(logprobs_check("tolerance --input " + batch_path() + " --row 2").exit_code, 2) << "past the last row";
  EXPECT_EQ(logprobs_check("verify --input " + batch_path() + " --result x --linear-sum --sum-rule sqrt").exit_code, 2);
  EXPECT_EQ(logprobs_check("verify --input " + batch_path() + " --result x --sum-rule pairwise").exit_code, 2);
}

TEST_F(VerifyPlanted, AGreedyExactBreakOfOneUlpFailsUnderItsOwnRule) {
  ResultData planted = reference();
  float& last = planted.lp_logits[0 * planted.width + kK];  // row 0 evaluates its top token 100
  last = std::nextafter(last, 0.0f);
  const CommandResult result = verify(planted, "greedy");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "greedy-exact")) << result.output;
  EXPECT_FALSE(contains(result.output, "value off by")) << "one ulp is within tolerance: " << result.output;
}

TEST_F(VerifyPlanted, AWrongRankFails) {
  ResultData planted = reference();
  planted.lp_ranks[1] = 1;  // token 7 is second
  const CommandResult result = verify(planted, "rank");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "rank of token 7 got 1 want 2")) << result.output;
}

// Issue 22: the diagnosis is the first line after the verdict's headline in the text, a
// `diagnoses` list in the JSON report and the first line after the headline of the JUnit
// failure; a passing verify has none.
TEST_F(VerifyPlanted, AFailureIsDiagnosedFirstAfterTheHeadlineInTextJsonAndJunit) {
  ResultData planted = reference();
  planted.lp_ranks[1] = 1;  // token 7 is second: 1 is the count of x_j > x_s, a strict rank
  const std::string json = path_of("verify_planted_diagnosed.json");
  const std::string junit = path_of("verify_planted_diagnosed.xml");
  const CommandResult result = verify(planted, "diagnosed", " --json " + json + " --junit " + junit);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const std::string headline = "FAIL: 1 of 1 results disagree\n";
  const std::size_t at = result.output.find(headline);
  ASSERT_NE(at, std::string::npos) << result.output;
  EXPECT_EQ(result.output.substr(at + headline.size(), 32), "diagnosis: rank_strict: row 1: e") << result.output;
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(json));
  const nlohmann::json& diagnoses = report.at("results").at(0).at("diagnoses");
  ASSERT_EQ(diagnoses.size(), 1u) << diagnoses;
  EXPECT_EQ(diagnoses[0].at("name"), "rank_strict");
  EXPECT_EQ(diagnoses[0].at("rows"), nlohmann::json::array({1}));
  EXPECT_TRUE(contains(diagnoses[0].at("evidence").get<std::string>(), "ranks counted with > instead of >="));
  std::ifstream xml_file(junit);
  const std::string xml((std::istreambuf_iterator<char>(xml_file)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(xml, "1 of 1 cases failed (diagnosis: rank_strict): ")) << xml;
  EXPECT_TRUE(contains(xml, "1 of 1 cases failed\ndiagnosis: rank_strict: row 1: ")) << xml;

  const std::string passing_json = path_of("verify_planted_passing.json");
  const CommandResult passing = verify(reference(), "passing", " --json " + passing_json);
  EXPECT_EQ(passing.exit_code, 0) << passing.output;
  EXPECT_FALSE(contains(passing.output, "diagnosis")) << passing.output;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(passing_json)).at("results").at(0).at("diagnoses"),
            nlohmann::json::array());
}

TEST_F(VerifyPlanted, TheSplitLayoutPassesReorderedAndFailsAWrongToken) {
  SplitResult split = split_from_packed(reference());
  for (std::uint64_t row = 0; row < split.rows; ++row) {  // reverse each row's top slots
    std::reverse(split.top_tokens.begin() + std::ptrdiff_t(row * kK),
                 split.top_tokens.begin() + std::ptrdiff_t((row + 1) * kK));
    std::reverse(split.top_logprobs.begin() + std::ptrdiff_t(row * kK),
                 split.top_logprobs.begin() + std::ptrdiff_t((row + 1) * kK));
  }
  const CommandResult reordered = verify(split, "split_reordered");
  EXPECT_EQ(reordered.exit_code, 0) << reordered.output;
  split.top_tokens[3] = split.top_tokens[3] == 5 ? 6 : 5;  // a token far below the top 20
  const CommandResult wrong = verify(split, "split_wrong_token");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_TRUE(contains(wrong.output, "batch 0, output row 0, slot")) << wrong.output;
  EXPECT_TRUE(contains(wrong.output, "the K largest candidate logits are not all reported")) << wrong.output;
}

// A 16-bit batch stays 16-bit: the reference runs it, a v1 backend refuses it by name when asked,
// and `compare` skips such backends, saying why.
TEST(CommandV2, SixteenBitBatchesAndOptionalParts) {
  BatchData batch = with_dtype(llm_rows(), LogitsDtype::bf16);
  batch.temperatures = std::vector<float>{0.7f, 1.0f};
  const std::string input = path_of("command_v2_bf16.safetensors");
  write_batch_file(input, batch, 5);
  const std::string output = path_of("command_v2_bf16_result.safetensors");
  const CommandResult run = logprobs_check("run --backend reference --input " + input + " --output " + output);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const CommandResult verified = logprobs_check("verify --input " + input + " --result " + output);
  EXPECT_EQ(verified.exit_code, 0) << verified.output;

  const CommandResult refused =
      logprobs_check("run --backend max --input " + input + " --output " + path_of("unused.safetensors"));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "backend max does not implement bf16 logits")) << refused.output;
  const CommandResult named = logprobs_check("compare --input " + input + " --backends max");
  EXPECT_EQ(named.exit_code, 2) << named.output;

  const CommandResult compare = logprobs_check("compare --input " + input);
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  EXPECT_TRUE(contains(compare.output, "max: skipped: the batch needs bf16 logits")) << compare.output;
}

TEST(CommandV2, KOptionsAndToleranceOptionsAreChecked) {
  const std::string input = path_of("command_v2_options.safetensors");
  write_batch_file(input, llm_rows());
  const std::pair<std::string, std::string> cases[] = {
      {"compare --k 5 --levels 2 --input " + input, "excludes"},
      {"compare --k 65536 --input " + input, "65536"},
      {"compare --k 5 --ulps nan --input " + input, "must be a finite number >= 0, got nan"},
      {"compare --k 5 --sigma -1 --input " + input, "must be a finite number >= 0"},
      {"campaign --time inf", "must be a finite number >= 0, got inf"},
      {"campaign --k 5 --levels 3", "excludes"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult result = logprobs_check(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, message)) << args << "\n" << result.output;
  }
  const CommandResult k5 = logprobs_check("compare --k 5 --ranks --backends reference --input " + input);
  EXPECT_EQ(k5.exit_code, 0) << k5.output;
}

}  // namespace
}  // namespace logprobs
