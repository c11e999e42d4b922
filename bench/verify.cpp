#include "verify.hpp"

#include <string>

#include "harness/judge.hpp"
#include "logprobs/backend.hpp"

namespace logprobs::bench {

std::string check_outputs(const BatchData& batch, std::uint32_t k, const ResultData& out, const Tolerance& tolerance) {
  const Verdict verdict = judge_against_reference(batch, k, out, tolerance);
  if (verdict.ok()) return {};
  return verdict.violations.front().message() + " (" + std::to_string(verdict.violations.size()) +
         " violations in all)";
}

}  // namespace logprobs::bench
