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
  const std::uint64_t max_values = budget ? budget->left() / kJsonBytesPerValue : UINT64_MAX;
  std::uint64_t values = 0;
  std::vector<std::set<std::string>> open;  // the keys of each open object (none for an array)
  json tree = json::parse(text, [&](int, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::key && ++values > max_values)
      budget->require(values * kJsonBytesPerValue, fmt::format("{}'s {}-value JSON tree", what, values));
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
  if (budget) budget->charge(values * kJsonBytesPerValue, fmt::format("{}'s {}-value JSON tree", what, values));
  return tree;
}

}  // namespace logprobs
