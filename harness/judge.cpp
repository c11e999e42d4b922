#include "judge.hpp"

#include <chrono>
#include <exception>

namespace logprobs {

BackendOutcome judge_backend(const Backend& backend, const BatchData& batch, int levels, const ResultData& reference,
                             const Tolerance& tolerance) {
  using Clock = std::chrono::steady_clock;
  BackendOutcome outcome;
  ResultData got;
  const auto start = Clock::now();
  try {
    got = run_backend(backend, batch, levels);
  } catch (const std::exception& e) {
    outcome.error = e.what();
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (outcome.error.empty()) outcome.verdict = compare_result(batch, levels, reference, got, tolerance);
  return outcome;
}

Verdict judge_against_reference(const BatchData& batch, int levels, const ResultData& got, const Tolerance& tolerance) {
  return compare_result(batch, levels, run_backend(reference_backend(), batch, levels), got, tolerance);
}

}  // namespace logprobs
