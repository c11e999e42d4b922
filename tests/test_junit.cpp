// JUnit XML (--junit) as CI's test reporters read it: a planted fault in a result judged by
// `verify` becomes one <failure> holding the violation and the replay line, with the counts
// right; a passing run's file has no failure; text is escaped; the file is written whole and
// never over an input.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "check/junit.hpp"
#include "command_runner.hpp"
#include "harness/batch_file.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;
using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;
using testing_support::path_of;
using testing_support::temp_dir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Well-formed XML by a real parser, where the machine has one (libxml2's xmllint).
void expect_well_formed(const std::string& path) {
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) return;
  EXPECT_EQ(std::system(("xmllint --noout '" + path + "'").c_str()), 0) << read_text(path);
}

// Two output rows at V = 6, K = 3.
BatchData small_batch() {
  BatchData b;
  b.vocab = b.row_stride = 6;
  b.rows = 2;
  b.logits = {0.5f, -1.f, 2.f, 1.5f, -3.f, 0.f, 3.f, 1.f, 2.f, 0.f, -1.f, -2.f};
  b.tokens = {};
  b.sampled_tokens = {4, 1};
  b.logit_row_offsets = b.lp_output_offsets = {0, 1, 2};
  b.token_row_offsets = {0, 0, 0};
  return b;
}

class Junit : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    write_batch_file(batch(), small_batch(), 3);
    const CommandResult run = logprobs_check("run --backend reference --input " + batch() + " --output " + good());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    ResultData planted = read_result_file(good()).packed;
    planted.lp_logits[1 * planted.width + 3] += 0.01f;  // row 1's last slot, the evaluated token 1
    write_result_file(bad(), planted);
  }
  static std::string batch() { return path_of("junit_batch.safetensors"); }
  static std::string good() { return path_of("junit_good.safetensors"); }
  static std::string bad() { return path_of("junit_bad.safetensors"); }
};

TEST_F(Junit, APlantedFailureThroughVerifyIsOneFailureWithTheViolationAndTheReplayLine) {
  const std::string xml_path = path_of("bad.xml");
  const CommandResult verify =
      logprobs_check("verify --input " + batch() + " --result " + bad() + " --junit " + xml_path + " --ulps 3");
  ASSERT_EQ(verify.exit_code, 1) << verify.output;
  const std::string xml = read_text(xml_path);
  expect_well_formed(xml_path);
  EXPECT_TRUE(contains(xml,
                       "<testsuites name=\"logprobs-check\" tests=\"1\" failures=\"1\" errors=\"0\" "
                       "skipped=\"0\""))
      << xml;
  EXPECT_TRUE(contains(xml, "<testsuite name=\"logprobs-check verify\" tests=\"1\" failures=\"1\"")) << xml;
  EXPECT_EQ(count_of(xml, "<testcase "), 1u) << xml;
  EXPECT_EQ(count_of(xml, "<failure "), 1u) << xml;
  EXPECT_TRUE(contains(xml, "<testcase classname=\"logprobs-check.verify\" name=\"" + bad() + " K=3\"")) << xml;
  // Token 1 is also row 1's top token, so greedy-exactness breaks first, then the value rule.
  EXPECT_TRUE(contains(xml, "message=\"1 of 1 cases failed: batch 1, output row 1, slot 2: token 1 is a top token"))
      << xml;
  EXPECT_TRUE(contains(xml, "batch 1, output row 1, slot 3: token 1 got -2.4461932 want -2.4561932 (value off by"))
      << xml;
  EXPECT_TRUE(contains(xml, "first failing case: " + bad())) << xml;
  EXPECT_TRUE(contains(xml, std::string("replay: ") + LOGPROBS_CHECK_PATH + " verify --input " + batch() +
                                " --result " + bad() + " --k 3 --ulps 3\n"))
      << xml;
  EXPECT_TRUE(contains(xml, "<property name=\"ulps\" value=\"3\"/>")) << xml;
}

TEST_F(Junit, APassingRunHasNoFailure) {
  const std::string xml_path = path_of("good.xml");
  const CommandResult verify =
      logprobs_check("verify --input " + batch() + " --result " + good() + " --junit " + xml_path);
  ASSERT_EQ(verify.exit_code, 0) << verify.output;
  const std::string xml = read_text(xml_path);
  expect_well_formed(xml_path);
  EXPECT_TRUE(contains(xml, "tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\"")) << xml;
  EXPECT_FALSE(contains(xml, "<failure")) << xml;
  EXPECT_EQ(count_of(xml, "<testcase "), 1u) << xml;
}

TEST_F(Junit, CompareWritesOneTestcasePerBackend) {
  const std::string xml_path = path_of("compare.xml");
  const CommandResult compare =
      logprobs_check("compare --input " + batch() + " --backends max,reference --junit " + xml_path);
  ASSERT_EQ(compare.exit_code, 0) << compare.output;
  const std::string xml = read_text(xml_path);
  expect_well_formed(xml_path);
  EXPECT_TRUE(contains(xml, "<testcase classname=\"logprobs-check.compare\" name=\"max K=3\"")) << xml;
  EXPECT_TRUE(contains(xml, "<testcase classname=\"logprobs-check.compare\" name=\"reference K=3\"")) << xml;
  EXPECT_TRUE(contains(xml, "tests=\"2\" failures=\"0\"")) << xml;
}

TEST_F(Junit, CampaignMarksACellWhoseEveryCaseIsSkippedAsSkipped) {
  const std::string xml_path = path_of("campaign.xml");
  // max implements K = 2^L - 1 only: at K = 5 it skips every case.
  const CommandResult campaign = logprobs_check("campaign --cases 3 --seed 2 --k 3,5 --backends max --out-dir " +
                                                temp_dir().string() + " --junit " + xml_path);
  ASSERT_EQ(campaign.exit_code, 0) << campaign.output;
  const std::string xml = read_text(xml_path);
  expect_well_formed(xml_path);
  EXPECT_TRUE(contains(xml, "tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"1\"")) << xml;
  EXPECT_TRUE(contains(xml, "<skipped message=\"every case needs K = 5 (not of the form 2^L - 1)")) << xml;
  EXPECT_TRUE(contains(xml, "<property name=\"seed\" value=\"2\"/>")) << xml;
}

// The case: a batch with no output rows printed "OK" and a passing testcase, a gate
// passed having judged nothing. Now it says so, exits 2, and its testcase is skipped.
TEST_F(Junit, ARunThatJudgedNoRowSaysSoAndIsSkipped) {
  BatchData empty = small_batch();
  empty.lp_output_offsets = {0, 0, 0};
  const std::string batch = path_of("no_rows_batch.safetensors"), result = path_of("no_rows_result.safetensors");
  write_batch_file(batch, empty, 3);
  write_result_file(result, ResultData(0, 4));
  for (const std::string& command :
       {"verify --input " + batch + " --result " + result, "compare --backends max --input " + batch}) {
    const std::string xml_path = path_of("no_rows.xml");
    const CommandResult run = logprobs_check(command + " --junit " + xml_path);
    EXPECT_EQ(run.exit_code, 2) << command << "\n" << run.output;
    EXPECT_FALSE(contains(run.output, "OK")) << run.output;
    EXPECT_TRUE(contains(run.output, "NOTHING JUDGED: " + batch + " has no output rows (lp_output_offsets[B] = 0)"))
        << run.output;
    const std::string xml = read_text(xml_path);
    expect_well_formed(xml_path);
    EXPECT_TRUE(contains(xml, "tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\"")) << xml;
    EXPECT_TRUE(contains(xml, "<skipped message=\"no output row was judged")) << xml;
  }
}

TEST_F(Junit, NeverWritesOverAnInputAndLeavesNoTemporaryFile) {
  const std::string before = read_text(bad());
  const CommandResult over_input =
      logprobs_check("verify --input " + batch() + " --result " + bad() + " --junit " + bad());
  EXPECT_EQ(over_input.exit_code, 2) << over_input.output;
  EXPECT_TRUE(contains(over_input.output, "refusing to write a report over " + bad())) << over_input.output;
  EXPECT_EQ(read_text(bad()), before);
  // The same file by another name.
  const std::string other_name = temp_dir().string() + "/./junit_batch.safetensors";
  EXPECT_EQ(logprobs_check("verify --input " + batch() + " --result " + good() + " --json " + other_name).exit_code, 2);
  // Replacing an older report leaves the new one whole and nothing beside it.
  const fs::path folder = temp_dir() / "replace";
  fs::create_directories(folder);
  std::ofstream(folder / "r.xml") << "old";
  ASSERT_EQ(
      logprobs_check("verify --input " + batch() + " --result " + good() + " --junit " + (folder / "r.xml").string())
          .exit_code,
      0);
  EXPECT_TRUE(read_text((folder / "r.xml").string()).starts_with("<?xml"));
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 1);
  const CommandResult no_folder =
      logprobs_check("verify --input " + batch() + " --result " + good() + " --junit " + path_of("none/r.xml"));
  EXPECT_EQ(no_folder.exit_code, 2) << no_folder.output;
  EXPECT_TRUE(contains(no_folder.output, "cannot create")) << no_folder.output;
}

TEST(JunitXml, EscapesMarkupAndReplacesWhatXmlCannotHold) {
  EXPECT_EQ(xml_escape("a < b && c > \"d\" 'e'"), "a &lt; b &amp;&amp; c &gt; &quot;d&quot; &apos;e&apos;");
  EXPECT_EQ(xml_escape("tab\tnew\nline\r"), "tab\tnew\nline\r");
  EXPECT_EQ(xml_escape(std::string("nul\0bell\x07", 9)),
            "nul\xEF\xBF\xBD"
            "bell\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("SPEC §4, \xF0\x9F\x98\x80"), "SPEC §4, \xF0\x9F\x98\x80");  // kept: valid UTF-8
  EXPECT_EQ(xml_escape("bad \xFF byte"), "bad \xEF\xBF\xBD byte");
  EXPECT_EQ(xml_escape("cut \xE2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("overlong \xC0\xAF"), "overlong \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("surrogate \xED\xA0\x80"), "surrogate \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\xEF\xBF\xBE"), "\xEF\xBF\xBD");  // U+FFFE, not an XML character
}

TEST(JunitXml, AFailingCellCarriesItsFirstViolationsAndReplayLine) {
  CellSummary cell("cpu", 7);
  cell.cases = 4;
  cell.failures = 2;
  cell.first_failure = "random case 3 <size 9>";
  cell.first_violations = {"batch 0, output row 1, slot 2: token 5 got 1 want 2 & more"};
  const std::string xml =
      junit_xml(junit_suite("campaign", std::span(&cell, 1), [](const CellSummary&) { return "replay --k 7"; }));
  EXPECT_TRUE(contains(xml,
                       "message=\"2 of 4 cases failed: batch 0, output row 1, slot 2: token 5 got 1 want 2 "
                       "&amp; more\""))
      << xml;
  EXPECT_TRUE(contains(xml, "first failing case: random case 3 &lt;size 9&gt;\n")) << xml;
  EXPECT_TRUE(contains(xml, "replay: replay --k 7\n</failure>")) << xml;
}

}  // namespace
}  // namespace logprobs
