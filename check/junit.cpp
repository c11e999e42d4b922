#include "junit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "harness/bounded_json.hpp"

namespace logprobs {
namespace {

// The length of the UTF-8 sequence starting at `text[i]` and its code point, or 0 when the bytes
// there are not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF).
std::size_t utf8_sequence(std::string_view text, std::size_t i, char32_t& code) {
  const auto byte = [&](std::size_t j) { return static_cast<unsigned char>(text[j]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  if (lead < 0x80)
    length = 1, code = lead;
  else if ((lead & 0xE0) == 0xC0)
    length = 2, code = lead & 0x1F;
  else if ((lead & 0xF0) == 0xE0)
    length = 3, code = lead & 0x0F;
  else if ((lead & 0xF8) == 0xF0)
    length = 4, code = lead & 0x07;
  else
    return 0;
  if (i + length > text.size()) return 0;
  for (std::size_t j = 1; j < length; ++j) {
    if ((byte(i + j) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + j) & 0x3F);
  }
  constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

bool allowed_in_xml(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) || c >= 0x10000;
}

std::string attribute(std::string_view name, std::string_view value) {
  return fmt::format(" {}=\"{}\"", name, xml_escape(value));
}

std::string seconds_text(double seconds) { return fmt::format("{:.3f}", seconds); }

std::string now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return text;
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

JunitCase cell_case(std::string_view command, const CellSummary& cell,
                    const std::function<std::string(const CellSummary&)>& replay) {
  JunitCase c;
  c.classname = fmt::format("logprobs-check.{}", command);
  c.name = fmt::format("{} K={}", cell.backend, cell.k);
  c.seconds = cell.seconds;
  const std::string parts = fmt::format("{}", fmt::join(cell.skip_reasons, ", "));
  if (cell.failures > 0) {
    // The diagnosis first after the headline, in the message (the classes' names) and the body.
    std::vector<std::string> names;
    for (const Diagnosis& d : cell.first_diagnoses) names.push_back(d.name());
    c.failure = fmt::format("{} of {} cases failed", cell.failures, cell.cases);
    if (!names.empty()) *c.failure += fmt::format(" (diagnosis: {})", fmt::join(names, ", "));
    if (!cell.first_violations.empty()) *c.failure += ": " + cell.first_violations.front();
    std::string text =
        fmt::format("{} at K = {}: {} of {} cases failed\n", cell.backend, cell.k, cell.failures, cell.cases);
    for (const std::string& line : diagnosis_lines(cell.first_diagnoses)) text += line + "\n";
    if (!cell.first_failure.empty()) text += fmt::format("first failing case: {}\n", cell.first_failure);
    for (const std::string& v : cell.first_violations) text += "  " + v + "\n";
    const std::string line = replay(cell);
    text += line.empty() ? "(no replay line: no counterexample file was written for this backend and K)\n"
                         : "replay: " + line + "\n";
    c.failure_text = std::move(text);
  } else if (cell.cases == 0) {
    c.skipped = cell.skipped > 0
                    ? fmt::format("every case needs {}, which {} does not implement (SPEC §4)", parts, cell.backend)
                    : std::string("no case was judged");
  } else if (cell.stats.rows == 0) {
    c.skipped = "no output row was judged: every case had none (lp_output_offsets[B] = 0)";
  }
  if (cell.skipped > 0 && cell.cases > 0)
    c.system_out = fmt::format("{} cases skipped: they need {}, which {} does not implement (SPEC §4)\n", cell.skipped,
                               parts, cell.backend);
  c.system_out +=
      fmt::format("cases {}, rows {}, max abs err {:g}, max ulp err {:g}, tol used {:g}\n", cell.cases, cell.stats.rows,
                  cell.stats.max_abs_error, cell.stats.max_ulp_error, cell.stats.max_tolerance_used);
  return c;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t code = 0;
    const std::size_t length = utf8_sequence(text, i, code);
    if (length == 0 || !allowed_in_xml(code)) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += length == 0 ? 1 : length;
      continue;
    }
    switch (code) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

std::string junit_xml(const JunitSuite& suite) {
  std::size_t failures = 0, skipped = 0;
  for (const JunitCase& c : suite.cases) {
    failures += c.failure.has_value();
    skipped += !c.failure && c.skipped;
  }
  const std::string counts = fmt::format(" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\"",
                                         suite.cases.size(), failures, skipped, seconds_text(suite.seconds));
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  xml += "<testsuites" + attribute("name", "logprobs-check") + counts + ">\n";
  xml += "  <testsuite" + attribute("name", suite.name) + counts + attribute("timestamp", now_iso8601()) +
         attribute("hostname", host_name()) + ">\n";
  if (!suite.properties.empty()) {
    xml += "    <properties>\n";
    for (const auto& [name, value] : suite.properties)
      xml += "      <property" + attribute("name", name) + attribute("value", value) + "/>\n";
    xml += "    </properties>\n";
  }
  for (const JunitCase& c : suite.cases) {
    xml += "    <testcase" + attribute("classname", c.classname) + attribute("name", c.name) +
           attribute("time", seconds_text(c.seconds)) + ">\n";
    if (c.failure)
      xml += "      <failure" + attribute("message", *c.failure) + attribute("type", "disagreement") + ">" +
             xml_escape(c.failure_text) + "</failure>\n";
    else if (c.skipped)
      xml += "      <skipped" + attribute("message", *c.skipped) + "/>\n";
    if (!c.system_out.empty()) xml += "      <system-out>" + xml_escape(c.system_out) + "</system-out>\n";
    xml += "    </testcase>\n";
  }
  xml += "  </testsuite>\n</testsuites>\n";
  return xml;
}

std::uint64_t junit_xml_bound(const JunitSuite& suite) {
  // The markup around each text is below 512 bytes.
  const auto text = [](std::string_view t) { return escaped_size_bound(t); };
  std::uint64_t bytes = 1024 + 2 * text(suite.name);
  for (const auto& [name, value] : suite.properties) bytes += 64 + text(name) + text(value);
  for (const JunitCase& c : suite.cases)
    bytes += 512 + text(c.classname) + text(c.name) + text(c.failure.value_or("")) + text(c.failure_text) +
             text(c.skipped.value_or("")) + text(c.system_out);
  return bytes;
}

JunitSuite junit_suite(std::string_view command, std::span<const CellSummary> cells,
                       const std::function<std::string(const CellSummary&)>& replay) {
  JunitSuite suite;
  suite.name = fmt::format("logprobs-check {}", command);
  for (const CellSummary& cell : cells) {
    suite.cases.push_back(cell_case(command, cell, replay));
    suite.seconds += cell.seconds;
  }
  return suite;
}

}  // namespace logprobs
