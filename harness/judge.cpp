#include "judge.hpp"

#include <chrono>
#include <exception>

namespace logprobs {

Tolerance tolerance_for(const Backend& backend, Tolerance tolerance) {
  if (backend.sums_in_one_chain()) tolerance.linear_sum = true;
  return tolerance;
}

BackendOutcome judge_backend(const Backend& backend, const BatchData& batch, std::uint32_t k, bool ranks,
                             const ResultData& reference, const Tolerance& tolerance) {
  using Clock = std::chrono::steady_clock;
  BackendOutcome outcome;
  outcome.skipped = missing_part(backend.features(), batch.view(), k, ranks);
  if (!outcome.skipped.empty()) return outcome;
  ResultData got;
  const auto start = Clock::now();
  try {
    got = run_backend(backend, batch, k, ranks);
  } catch (const std::exception& e) {
    outcome.error = e.what();
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (outcome.error.empty())
    outcome.verdict = compare_result(batch, k, reference, got, tolerance_for(backend, tolerance));
  return outcome;
}

Verdict judge_against_reference(const BatchData& batch, std::uint32_t k, const ResultData& got,
                                const Tolerance& tolerance) {
  return compare_result(batch, k, run_backend(reference_backend(), batch, k), got, tolerance);
}

}  // namespace logprobs
