// The public contract, part 4: a backend, and the registry that lists them by name.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "logprobs/batch.hpp"
#include "logprobs/validate.hpp"

namespace logprobs {

struct Availability {
  bool available = true;
  std::string reason;  // why not, when unavailable
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual Availability availability() const { return {}; }
  // True when compute() reads the batch's host memory in place; false for a device backend,
  // which copies whole buffers to its device (so a sparse host mapping or a host sanitizer
  // says nothing about it).
  virtual bool computes_on_host() const { return true; }
  // For a variant, the backend whose kernel it runs in one forced configuration (`cpu-sse4` is
  // `cpu` held to SSE4 whatever the CPU offers); empty for a backend in its own right. Tools that
  // check correctness run variants like any backend; tools that compare speed skip them unless
  // asked.
  virtual std::string_view variant_of() const { return {}; }

  // Validates (SPEC §4) and only then computes. Safe to call from several threads at once.
  void run(const RaggedBatch& batch, int levels, const LogprobsOutput& out) const {
    validate_batch(batch, levels, out);
    compute(batch, levels, out);
  }

 protected:
  // Called only with a batch and outputs that passed validate_batch.
  virtual void compute(const RaggedBatch& batch, int levels, const LogprobsOutput& out) const = 0;
};

// Every backend compiled into this build, available here or not, in registration order
// (reference first).
std::span<const Backend* const> all_backends();

// The backend with that name, or nullptr.
const Backend* find_backend(std::string_view name);

// The name of the reference backend (reference/reference.cpp), the judge of SPEC §5.
inline constexpr std::string_view kReferenceName = "reference";

// The reference backend; throws std::logic_error in a build without one.
const Backend& reference_backend();

}  // namespace logprobs
