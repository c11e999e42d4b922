#include "verify.hpp"

#include <string>

#include "harness/judge.hpp"
#include "logprobs/backend.hpp"

namespace logprobs::bench {

std::string check_outputs(const BatchData& batch, int levels, const ResultData& out) {
  const Verdict verdict = judge_against_reference(batch, levels, out);
  if (verdict.ok()) return {};
  return verdict.violations.front().message() + " (" + std::to_string(verdict.violations.size()) +
         " violations in all)";
}

}  // namespace logprobs::bench
