#include "memory_budget.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace logprobs {
namespace {

// The limit in a cgroup v2 memory.max or v1 memory.limit_in_bytes file; none when the file is
// absent or says "max".
std::uint64_t cgroup_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return UINT64_MAX;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {  // out of range: no limit worth the name
    return UINT64_MAX;
  }
}

}  // namespace

void MemoryBudget::charge(std::uint64_t bytes, std::string_view what) {
  require(bytes, what);
  used_ += bytes;
}

void MemoryBudget::require(std::uint64_t bytes, std::string_view what) const {
  if (bytes > limit_ - used_)
    throw MemoryBudgetExceeded(
        fmt::format("{} needs {}, which with the {} already counted exceeds the memory budget of {}", what,
                    byte_size_text(bytes), byte_size_text(used_), byte_size_text(limit_)));
}

std::uint64_t default_memory_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  std::uint64_t memory = pages > 0 && page_size > 0 ? std::uint64_t(pages) * std::uint64_t(page_size) : UINT64_MAX;
  memory = std::min(
      {memory, cgroup_limit("/sys/fs/cgroup/memory.max"), cgroup_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes")});
  return memory == UINT64_MAX ? std::uint64_t{4} << 30 : memory / 2;  // 4 GiB when nothing says
}

std::string byte_size_text(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double scaled = double(bytes) / 1024;
  int unit = 0;
  while (scaled >= 1024 && unit < 5) scaled /= 1024, ++unit;
  return fmt::format("{} bytes ({:.1f} {})", bytes, scaled, kUnits[unit]);
}

}  // namespace logprobs
