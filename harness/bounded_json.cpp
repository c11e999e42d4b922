#include "bounded_json.hpp"

#include <fmt/format.h>

#include <set>
#include <vector>

namespace logprobs {
namespace {

// What nlohmann's tree costs per value at most: a 16-byte value, its share of a vector grown by
// doubling (three times that while it moves), or a container's own allocation. Measured: 39 bytes
// a value for a flat array, 75 for nested arrays.
constexpr std::uint64_t kJsonBytesPerValue = 80;

}  // namespace

nlohmann::json parse_bounded_json(const std::string& text, MemoryBudget* budget, std::string_view what,
                                  const std::function<void(const std::string&)>& refuse) {
  using json = nlohmann::json;
  // A string costs its characters beside its value: a 40 MiB string is one value of the tree.
  std::uint64_t values = 0, string_bytes = 0;
  const auto tree_bytes = [&] { return values * kJsonBytesPerValue + string_bytes; };
  const auto description = [&] { return fmt::format("{}'s {}-value JSON tree", what, values); };
  std::vector<std::set<std::string>> open;  // the keys of each open object (none for an array)
  json tree = json::parse(text, [&](int, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::key) ++values;
    if (parsed.is_string()) string_bytes += parsed.get_ref<const std::string&>().size();
    if (budget && tree_bytes() > budget->left()) budget->require(tree_bytes(), description());
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (open.size() >= kMaxJsonDepth) refuse(fmt::format("nests deeper than {} levels", kMaxJsonDepth));
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.back().insert(parsed.get<std::string>()).second)
          refuse(fmt::format("has the key {} twice in one object", parsed.dump()));
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  });
  if (budget) budget->charge(tree_bytes(), description());
  return tree;
}

std::uint64_t escaped_size_bound(std::string_view text) {
  // A control character escapes to 6 ("\u001f"), '"' and '\\' to 2, and a byte of broken UTF-8
  // to the 3 of U+FFFD; the rest is copied.
  std::uint64_t bytes = 0;
  for (const unsigned char c : text) bytes += c < 0x20 ? 6 : c == '"' || c == '\\' ? 2 : c >= 0x80 ? 3 : 1;
  return bytes;
}

std::uint64_t dump_size_bound(const nlohmann::json& json, int indent, int depth) {
  using json_t = nlohmann::json;
  // A number prints in at most 25 bytes; each line of a container's value adds its indentation, a
  // comma and a newline.
  const auto string_bound = [](const std::string& text) { return escaped_size_bound(text) + 2; };
  const std::uint64_t line = std::uint64_t(indent) * std::uint64_t(depth + 1) + 2;
  switch (json.type()) {
    case json_t::value_t::object: {
      std::uint64_t bytes = 2 + line;
      for (const auto& [key, value] : json.items())
        bytes += line + string_bound(key) + 2 + dump_size_bound(value, indent, depth + 1);
      return bytes;
    }
    case json_t::value_t::array: {
      std::uint64_t bytes = 2 + line;
      for (const json_t& value : json) bytes += line + dump_size_bound(value, indent, depth + 1);
      return bytes;
    }
    case json_t::value_t::string:
      return string_bound(json.get_ref<const std::string&>());
    default:
      return 25;
  }
}

}  // namespace logprobs
