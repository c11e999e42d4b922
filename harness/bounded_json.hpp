// JSON from files the harness did not write (a safetensors header, a campaign's reports), parsed
// within bounds a hostile file cannot push past.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memory_budget.hpp"

namespace logprobs {

// The nesting limit of serde_json, with which the safetensors reference parses its header.
// nlohmann has none and builds every level: gigabytes for a 98 MB file of brackets.
inline constexpr std::size_t kMaxJsonDepth = 128;

// `text` parsed by nlohmann with what it lets through refused as it is met: nesting deeper than
// kMaxJsonDepth, a key twice in one object (nlohmann keeps the last, so a broken first one would
// pass unseen), and a tree larger than `budget` allows, at 80 bytes a value plus the characters of
// its strings and keys (charged to it when the parse ends). `refuse` receives the reason ("nests deeper than 128 levels") and must throw;
// nlohmann's own errors (parse_error, out_of_range) propagate. `what` names the text in a budget
// message ("file.safetensors: the header").
nlohmann::json parse_bounded_json(const std::string& text, MemoryBudget* budget, std::string_view what,
                                  const std::function<void(const std::string&)>& refuse);

// At least the length of `text` escaped in a JSON string (or in XML: '&quot;' is 6 bytes too),
// broken UTF-8 replaced by U+FFFD.
std::uint64_t escaped_size_bound(std::string_view text);

// At least the length of json.dump(indent) with broken UTF-8 replaced, found without writing it:
// what a writer charges a budget before dumping.
std::uint64_t dump_size_bound(const nlohmann::json& json, int indent, int depth = 0);

}  // namespace logprobs
