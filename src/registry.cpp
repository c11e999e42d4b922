// The registry. Backends are listed by CMake (logprobs_register_backend), which generates
// registered_backends.gen.cpp, so adding a backend touches no shared source file.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "logprobs/backend.hpp"

namespace logprobs {

// Defined in the generated file: one owned instance of every registered backend.
std::vector<std::unique_ptr<Backend>> make_registered_backends();

std::span<const Backend* const> all_backends() {
  static const auto owned = make_registered_backends();
  static const auto views = [] {
    std::vector<const Backend*> v;
    for (const auto& b : owned) v.push_back(b.get());
    return v;
  }();
  return views;
}

const Backend* find_backend(std::string_view name) {
  const auto all = all_backends();
  const auto it = std::find_if(all.begin(), all.end(), [&](const Backend* b) { return b->name() == name; });
  return it == all.end() ? nullptr : *it;
}

const Backend& reference_backend() {
  static const Backend* const reference = find_backend(kReferenceName);
  if (reference == nullptr) throw std::logic_error("the reference backend is not registered in this build");
  return *reference;
}

}  // namespace logprobs
