// The memory a file may make the harness allocate. A few kilobytes of batch can ask for a result
// of gigabytes (V = 1, thousands of rows, K = 65535) and a header can nest brackets millions
// deep; each such size is counted against a budget before anything is allocated, so a hostile or
// mistaken file is refused with a message instead of ending in the kernel's OOM killer.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace logprobs {

// A size over the budget. The message names what needed the memory, its size and the budget.
class MemoryBudgetExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MemoryBudget {
 public:
  explicit MemoryBudget(std::uint64_t limit_bytes) : limit_(limit_bytes) {}

  // Counts `bytes` for `what` ("file.safetensors: tensor 'logits'") against the budget, or throws
  // MemoryBudgetExceeded when they do not fit beside what is already counted.
  void charge(std::uint64_t bytes, std::string_view what);
  // Throws as charge would, but counts nothing: for memory freed before the next charge.
  void require(std::uint64_t bytes, std::string_view what) const;
  std::uint64_t left() const { return limit_ - used_; }

  std::uint64_t limit() const { return limit_; }
  std::uint64_t used() const { return used_; }

 private:
  std::uint64_t limit_;
  std::uint64_t used_ = 0;
};

// Half of the memory this process can have: the machine's physical memory, or its control
// group's limit when that is lower (a container), so one judged file leaves room for the rest.
std::uint64_t default_memory_budget();

// "2147483648 bytes (2.0 GiB)".
std::string byte_size_text(std::uint64_t bytes);

}  // namespace logprobs
