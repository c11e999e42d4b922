// JUnit XML, the test-report format that GitLab (artifacts:reports:junit), Jenkins (the junit
// step) and GitHub's test-report actions read: <testsuites> holding one <testsuite> holding one
// <testcase> per backend and K (or per judged result file), a failing one with a <failure>
// whose text is the first violations and the line that replays them, a skipped one with
// <skipped>. Counts (tests, failures, errors, skipped) are on both suite elements.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report.hpp"

namespace logprobs {

struct JunitCase {
  std::string classname;  // "logprobs-check.campaign": what reporters group by
  std::string name;       // "cpu K=5"
  double seconds = 0;
  std::optional<std::string> failure;  // the <failure message=...>; the case failed when set
  std::string failure_text;            // its body: the violations and the replay line
  std::optional<std::string> skipped;  // the <skipped message=...>
  std::string system_out;              // what else a reader should know (partial skips)
};

struct JunitSuite {
  std::string name;  // "logprobs-check campaign"
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<JunitCase> cases;
  double seconds = 0;
};

// Text made safe for XML 1.0 content and attribute values: &, <, >, " and ' as entities; bytes
// that are not UTF-8, and characters XML 1.0 does not allow (controls other than tab, newline and
// carriage return), as U+FFFD, so that a message quoting arbitrary bytes cannot break a reader.
std::string xml_escape(std::string_view text);

std::string junit_xml(const JunitSuite& suite);
// At least junit_xml(suite).size(), found without writing it: what a budget is charged first.
std::uint64_t junit_xml_bound(const JunitSuite& suite);

// One testcase per cell, named "<backend> K=<k>" in class "logprobs-check.<command>". A failing
// cell's failure holds its first failing case, that case's violations and `replay(cell)` (a
// command line, or "" when there is none); a cell whose every case was skipped, or whose cases
// had no output row to judge, is skipped.
JunitSuite junit_suite(std::string_view command, std::span<const CellSummary> cells,
                       const std::function<std::string(const CellSummary&)>& replay);

}  // namespace logprobs
