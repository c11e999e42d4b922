// The public contract, part 4: a backend, what optional parts it implements, and the registry
// that lists backends by name.
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

// The optional parts of the contract (SPEC §4) that a backend implements.
struct Features {
  bool bf16_logits = false;
  bool f16_logits = false;
  bool temperatures = false;
  bool ranks = false;
  bool any_k = false;  // a K not of the form 2^L - 1
  static constexpr Features all() { return {true, true, true, true, true}; }
};

// The first optional part that `features` lacks for this batch, K and ranks request, as it reads
// in a message ("bf16 logits", "K = 5 (not of the form 2^L - 1)"), or "" when it lacks none.
std::string missing_part(const Features& features, const RaggedBatch& batch, std::uint32_t k, bool ranks);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual Availability availability() const { return {}; }
  virtual Features features() const { return {}; }
  // True for a backend that sums exp(x_j - m) in one f32 chain (the `max` port): SPEC §5 judges
  // it with sum_err(V) = V * 2^-24 instead of sigma * sqrt(V) * 2^-24.
  virtual bool sums_in_one_chain() const { return false; }
  // True for a backend whose output bits equal, on every input, those of canonical_arithmetic.hpp
  // (SPEC §8); the campaign checks every such backend against the others bit for bit.
  virtual bool claims_canonical_arithmetic() const { return false; }
  // True when compute() reads the batch's host memory in place; false for a device backend,
  // which copies whole buffers to its device (so a sparse host mapping or a host sanitizer
  // says nothing about it).
  virtual bool computes_on_host() const { return true; }
  // For a variant, the backend whose kernel it runs in one forced configuration (`cpu-sse4` is
  // `cpu` held to SSE4 whatever the CPU offers); empty for a backend in its own right. Tools that
  // check correctness run variants like any backend; tools that compare speed skip them unless
  // asked.
  virtual std::string_view variant_of() const { return {}; }

  // Validates (SPEC §4: InvalidBatch), refuses a part the backend lacks (UnsupportedPart), and
  // only then computes the top-K outputs. Safe to call from several threads at once.
  void run(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const;

 protected:
  // Called only with a batch and outputs that passed validate_batch, needing only `features()`.
  virtual void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const = 0;
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

// The name of the backend that runs SPEC §8's canonical arithmetic entry by entry
// (reference/canonical.cpp): the bits every backend that claims §8 must give.
inline constexpr std::string_view kCanonicalName = "canonical";

}  // namespace logprobs
