#include "verify.hpp"

#include <string>

#include "comparator.hpp"
#include "logprobs/backend.hpp"

namespace logprobs::bench {

std::string check_outputs(const BatchData& batch, int levels, const ResultData& out) {
  const ResultData reference = run_backend(*find_backend("reference"), batch, levels);
  const Verdict verdict = compare_result(batch, levels, reference, out);
  if (verdict.ok()) return {};
  return verdict.violations.front().message() + " (" + std::to_string(verdict.violations.size()) +
         " violations in all)";
}

}  // namespace logprobs::bench
