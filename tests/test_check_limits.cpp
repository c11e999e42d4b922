// logprobs-check's limits on what the user and the files may ask of it: whole-number options
// as the user wrote them (CLI11 alone reads "-1" as 2^64 - 1), and a memory budget that refuses
// a small file implying a huge allocation before it is made, quickly and in little memory.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "command_runner.hpp"
#include "harness/batch_file.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;

using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;
using testing_support::logprobs_check_measured;
using testing_support::MeasuredResult;
using testing_support::path_of;

// The sanitizers' shadow memory and quarantine come on top of what the command allocates, and
// their checks make it several times slower.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kSanitizerRssKb = 400 * 1024;
constexpr double kSanitizerSlowdown = 5;
#else
constexpr long kSanitizerRssKb = 0;
constexpr double kSanitizerSlowdown = 1;
#endif

TEST(CheckOptions, WholeNumbersAreDecimalAndInRange) {
  const std::string campaign = "campaign --time 0 --backends max ";
  const std::pair<std::string, std::string> refused[] = {
      {campaign + "--levels 0 --cases -1", "--cases: must be a whole number in decimal digits"},
      {campaign + "--levels 0 --cases 0x10", "--cases: must be a whole number in decimal digits"},
      {campaign + "--levels 0 --seed -1", "--seed: must be a whole number in decimal digits"},
      {campaign + "--levels 0 --seed 18446744073709551616", "--seed: must be a whole number in decimal digits"},
      {campaign + "--k -1", "--k: must be a whole number in decimal digits"},
      {"compare --input x --max-violations -1", "--max-violations: must be a whole number in decimal digits"},
      {"compare --input x --memory-budget -1", "--memory-budget: must be a byte count"},
      {"compare --input x --memory-budget 1e9", "--memory-budget: must be a byte count"},
  };
  for (const auto& [args, fragment] : refused) {
    const CommandResult result = logprobs_check(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, fragment)) << args << "\n" << result.output;
  }
  // Leading zeros read as decimal, not octal.
  const CommandResult decimal = logprobs_check(campaign + "--levels 0 --cases 010");
  EXPECT_EQ(decimal.exit_code, 0) << decimal.output;
  EXPECT_TRUE(contains(decimal.output, "at most 10 random cases")) << decimal.output;
  const CommandResult largest = logprobs_check(campaign + "--levels 0 --cases 1 --seed 18446744073709551615");
  EXPECT_TRUE(contains(largest.output, "seed 18446744073709551615")) << largest.output;
}

TEST(CheckOptions, AListNamingOneThingTwiceIsRefused) {
  const std::pair<std::string, std::string> refused[] = {
      {"campaign --time 0 --levels 0 --backends max,max", "--backends names 'max' twice"},
      {"campaign --time 0 --levels 3,3 --backends max", "--levels lists K = 7 twice"},
      {"campaign --time 0 --k 0,5,0 --backends max", "--k lists K = 0 twice"},
      {"compare --input x --backends max,reference,max", "--backends names 'max' twice"},
  };
  for (const auto& [args, fragment] : refused) {
    const CommandResult result = logprobs_check(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, fragment)) << args << "\n" << result.output;
  }
}

// One batch item of `rows` output rows over V = 1, K = 65535 in the metadata: 6 to 8 bytes of
// file per row, each asking for a result row of 512 KiB.
std::string wide_result_batch(const std::string& name, std::uint64_t rows, LogitsDtype dtype) {
  BatchData b;
  b.vocab = b.row_stride = 1;
  b.rows = rows;
  b.dtype = dtype;
  if (dtype == LogitsDtype::f32)
    b.logits.assign(rows, 0.0f);
  else
    b.logits16.assign(rows, 0);
  b.tokens.assign(rows - 1, 0);
  b.sampled_tokens = {0};
  b.logit_row_offsets = {0, std::uint32_t(rows)};
  b.token_row_offsets = {0, std::uint32_t(rows - 1)};
  b.lp_output_offsets = {0, std::uint32_t(rows)};
  const std::string path = path_of(name);
  write_batch_file(path, b, kMaxK);
  return path;
}

void expect_refused_quickly(const MeasuredResult& result, const std::string& fragment, double seconds, long rss_mb) {
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, fragment)) << result.output;
  EXPECT_TRUE(contains(result.output, "exceeds the memory budget")) << result.output;
  EXPECT_TRUE(contains(result.output, "--memory-budget")) << result.output;
  EXPECT_LT(result.seconds, seconds * kSanitizerSlowdown) << result.output;
  EXPECT_LT(result.max_rss_kb, rss_mb * 1024 + kSanitizerRssKb) << result.output;
}

// The issue's case: 33 KB asking for a 2 GiB result (4096 rows x 65536 slots x 8 bytes).
TEST(CheckMemoryBudget, ASmallBatchAskingForAHugeResultIsRefusedBeforeAllocating) {
  const std::string batch = wide_result_batch("wide_33k.safetensors", 4096, LogitsDtype::f32);
  ASSERT_LT(fs::file_size(batch), 34'000u);
  const std::string output = path_of("wide_33k_result.safetensors");
  write_result_file(path_of("tiny_result.safetensors"), ResultData(1, 2));
  // compare holds the reference's result and a backend's (and the canonical backend's beside one
  // that claims SPEC §8, which max does not).
  const std::pair<std::string, std::string> commands[] = {
      {"run --backend reference --output " + output,
       "the result of 4096 rows x 65536 slots at K = 65535 needs 2147483648 bytes"},
      {"compare --backends max", "2 results of 4096 rows x 65536 slots at K = 65535 needs 4294967296 bytes"},
      {"verify --result " + path_of("tiny_result.safetensors"),
       "the result of 4096 rows x 65536 slots at K = 65535 needs 2147483648 bytes"},
  };
  for (const auto& [command, fragment] : commands)
    expect_refused_quickly(logprobs_check_measured(command + " --memory-budget 1GiB --input " + batch), fragment, 1.0,
                           100);
  EXPECT_FALSE(fs::exists(output));
}

// Without the option the budget is half the machine's memory: 2^21 rows asking for 1 TiB is
// beyond any machine that runs this.
TEST(CheckMemoryBudget, TheDefaultBudgetRefusesAResultBeyondTheMachine) {
  const std::string batch = wide_result_batch("wide_1tib.safetensors", std::uint64_t{1} << 21, LogitsDtype::bf16);
  const MeasuredResult result = logprobs_check_measured("run --backend reference --input " + batch + " --output " +
                                                        path_of("unused.safetensors"));
  expect_refused_quickly(result, "needs 1099511627776 bytes (1.0 TiB)", 2.0, 100);
}

TEST(CheckMemoryBudget, EveryTensorReadIsCounted) {
  const std::string batch = wide_result_batch("tensor_over_budget.safetensors", 300'000, LogitsDtype::f32);
  const MeasuredResult result = logprobs_check_measured("compare --memory-budget 1000000 --input " + batch);
  expect_refused_quickly(result, "tensor 'logits' (F32 [300000, 1]) needs 1200000 bytes", 2.0, 100);
}

void write_header_file(const std::string& path, const std::string& header) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out.write(header.data(), std::streamsize(header.size()));
}

// A header of 98 MB, under the 100 MB limit, of nested brackets: a tree of gigabytes for a
// reader without a depth limit. merge reads its reports with the same bound.
TEST(CheckMemoryBudget, NestedBracketsAreRefusedQuickly) {
  const std::size_t depth = 49'000'000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  const std::string batch = path_of("nested_98mb.safetensors"), report = path_of("nested_98mb.json");
  write_header_file(batch, R"({"logits":)" + nested + "}");
  std::ofstream(report, std::ios::binary) << nested;
  const std::pair<std::string, std::string> commands[] = {
      {"compare --k 1 --input " + batch, "header nests deeper than 128 levels"},
      {"merge " + report, report + " is not a campaign report: its JSON nests deeper than 128 levels"},
  };
  for (const auto& [command, fragment] : commands) {
    const MeasuredResult result = logprobs_check_measured(command);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(contains(result.output, fragment)) << result.output;
    EXPECT_LT(result.seconds, 2.0 * kSanitizerSlowdown) << command;
    EXPECT_LT(result.max_rss_kb, 300 * 1024 + kSanitizerRssKb) << command << ": the file itself is 98 MB";
  }
  fs::remove(batch);
  fs::remove(report);
}

TEST(CheckMemoryBudget, MergeCountsItsReports) {
  const std::string report = path_of("large_report.json");
  std::ofstream(report) << "[" << std::string(2'000'000, ' ') << "]";
  const MeasuredResult result = logprobs_check_measured("merge --memory-budget 1MB " + report);
  expect_refused_quickly(result, report + " needs 2000002 bytes", 2.0, 100);
}

// Two valid shard reports of 8 MiB each (a quick run's, padded with counterexamples of 64 KiB
// origins, the longest text the schema allows), merged with --json and --junit: everything merge
// holds (the texts, the tree, what is read out, the merged copy, the XML) is charged, so under a
// budget below what they need it stops within the budget, before printing a verdict; with room,
// it merges within that room. They peaked at 1.1 GB under --memory-budget 100M at 40 MiB each.
TEST(CheckMemoryBudget, MergeStaysWithinItsBudget) {
  std::string shards;
  for (int i = 0; i < 2; ++i) {
    const std::string shard = path_of("padded_shard" + std::to_string(i) + ".json");
    const CommandResult run = logprobs_check("campaign --seed 5 --cases 2 --k 0 --backends max --shard " +
                                             std::to_string(i) + "/2 --json " + shard + " --out-dir " + path_of("pad"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::ifstream in(shard);
    nlohmann::json report = nlohmann::json::parse(in);
    const nlohmann::json padding = {{"backend", "max"}, {"k", 0},         {"ranks", false},
                                    {"origin", std::string(65536, 'x')}, {"file", "f"}, {"replay", "r"},
                                    {"shrink_steps", 0},                 {"violations", nlohmann::json::array()},
                                    {"reproduces", true}};
    for (int c = 0; c < 128; ++c) report["counterexamples"].push_back(padding);
    std::ofstream(shard, std::ios::trunc) << report.dump();
    shards += shard + " ";
  }
  const std::string outputs = " --json " + path_of("padded.json") + " --junit " + path_of("padded.xml");
  const MeasuredResult tight = logprobs_check_measured("merge " + shards + "--memory-budget 40M" + outputs);
  // The parse of 16 MiB takes under a second alone; the bound is for a loaded machine.
  expect_refused_quickly(tight, "", 30.0, 40 + 30);
  EXPECT_FALSE(contains(tight.output, "OK")) << "refused before its verdict";
  const MeasuredResult roomy = logprobs_check_measured("merge " + shards + "--memory-budget 200M" + outputs);
  EXPECT_EQ(roomy.exit_code, 0) << roomy.output;
  EXPECT_LT(roomy.max_rss_kb, (200 + 30) * 1024 + kSanitizerRssKb) << roomy.output;
  EXPECT_GT(fs::file_size(path_of("padded.xml")), 0u);
}

// Issue 24's finding 6: a 32 MiB result (64 rows x 65536 slots over V = 1) whose every token is
// out of range breaks 4194368 rules; every violation was kept (1.2 GB under --memory-budget 300M).
// Now the first --max-violations are kept and listed, all are counted (by rule, in the JSON too),
// and what the kept ones can take is charged: keeping them all does not fit 300M, exit 2.
TEST(CheckMemoryBudget, AVerdictKeepsItsFirstViolationsWithinTheBudget) {
  const std::string batch = wide_result_batch("wrong_everywhere_batch.safetensors", 64, LogitsDtype::f32);
  ResultData wrong(64, 65536);
  std::fill(wrong.lp_tokens.begin(), wrong.lp_tokens.end(), 2u);  // V = 1: neither a token nor padding
  const std::string result = path_of("wrong_everywhere_result.safetensors");
  write_result_file(result, wrong);
  const std::string json = path_of("wrong_everywhere.json");
  const std::string files = " --input " + batch + " --result " + result;
  const MeasuredResult kept = logprobs_check_measured("verify --memory-budget 300M --json " + json + files);
  EXPECT_EQ(kept.exit_code, 1) << kept.output;
  EXPECT_TRUE(contains(kept.output, "... 4194368 violations counted (last_token: 64, token_range: 4194240, "
                                    "padding_count: 64), the first 20 kept and listed (--max-violations)"))
      << kept.output;
  EXPECT_LT(kept.max_rss_kb, 300 * 1024 + kSanitizerRssKb) << kept.output;
  std::ifstream in(json);
  const nlohmann::json cell = nlohmann::json::parse(in)["results"][0];
  EXPECT_EQ(cell["violations"], 4194368);
  EXPECT_EQ(cell["violations_kept"], 20);
  EXPECT_EQ(cell["violations_by_rule"], nlohmann::json::parse(R"({"last_token": 64, "token_range": 4194240,
                                                                  "padding_count": 64})"));
  const MeasuredResult all = logprobs_check_measured("verify --memory-budget 300M --max-violations 4194368" + files);
  expect_refused_quickly(all, "the verdict (4194368 violations kept at most, and every failed row) needs", 10.0, 300);
}

// Flat, the same bytes build a smaller tree but still many times the header: counted too.
TEST(CheckMemoryBudget, AHeaderWhoseJsonTreeExceedsTheBudgetIsRefused) {
  const std::string path = path_of("flat_20mb.safetensors");
  std::string values;
  for (int i = 0; i < 10'000'000; ++i) values += "0,";
  write_header_file(path, R"({"logits":{"x":[)" + values + "0]}}");
  const MeasuredResult result = logprobs_check_measured("compare --k 1 --memory-budget 100MB --input " + path);
  expect_refused_quickly(result, "the header's", 2.0, 200);
  fs::remove(path);
}

}  // namespace
}  // namespace logprobs
