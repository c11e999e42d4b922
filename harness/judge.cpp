#include "judge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <exception>

namespace logprobs {

Tolerance tolerance_for(const Backend& backend, Tolerance tolerance) {
  if (backend.sums_in_one_chain()) tolerance.sum_rule = SumRule::linear;
  return tolerance;
}

std::string first_bit_difference(const ResultData& got, const ResultData& want) {
  if (got.rows != want.rows || got.width != want.width || got.ranks != want.ranks)
    return fmt::format("shape [{}, {}]{} where [{}, {}]{} was expected", got.rows, got.width,
                       got.ranks ? " with ranks" : "", want.rows, want.width, want.ranks ? " with ranks" : "");
  if (same_bits(got, want)) return "";  // the common case, at the speed of memcmp; else find where
  for (std::uint64_t o = 0; o < got.rows; ++o) {
    for (std::uint64_t slot = 0; slot < got.width; ++slot) {
      const float g = got.value(o, slot), w = want.value(o, slot);
      if (got.token(o, slot) != want.token(o, slot) ||
          std::bit_cast<std::uint32_t>(g) != std::bit_cast<std::uint32_t>(w))
        return fmt::format("output row {}, slot {}: ({}, {} = {:#010x}) where ({}, {} = {:#010x}) was expected", o,
                           slot, got.token(o, slot), g, std::bit_cast<std::uint32_t>(g), want.token(o, slot), w,
                           std::bit_cast<std::uint32_t>(w));
    }
    if (got.ranks && got.lp_ranks[o] != want.lp_ranks[o])
      return fmt::format("output row {}: rank {} where {} was expected", o, got.lp_ranks[o], want.lp_ranks[o]);
  }
  return "";
}

std::optional<ResultData> canonical_result(std::span<const Backend* const> backends, const BatchData& batch,
                                           std::uint32_t k, bool ranks) {
  const Backend* canonical = find_backend(kCanonicalName);
  const bool any_claims = std::any_of(backends.begin(), backends.end(), [](const Backend* b) {
    return b->claims_canonical_arithmetic() && b->name() != kCanonicalName;
  });
  if (canonical == nullptr || !any_claims) return std::nullopt;
  return run_backend(*canonical, batch, k, ranks);
}

BackendOutcome judge_backend(const Backend& backend, const BatchData& batch, std::uint32_t k, bool ranks,
                             const ResultData& reference, const Tolerance& tolerance, const ResultData* canonical,
                             Diagnose diagnosis, const KeptViolations& kept, JudgedResults* judged) {
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
  if (!outcome.error.empty()) return outcome;
  if (canonical != nullptr && backend.claims_canonical_arithmetic()) {
    if (const std::string difference = first_bit_difference(got, *canonical); !difference.empty())
      outcome.canonical_difference = "SPEC §8: bits differ from the canonical arithmetic's at " + difference;
  }
  const Tolerance judged_by = tolerance_for(backend, tolerance);
  JudgedResults::Judged* seen = judged != nullptr ? judged->find(got, judged_by) : nullptr;
  outcome.verdict = seen != nullptr ? seen->verdict : compare_result(batch, k, reference, got, judged_by, kept);
  const bool diagnosed = !outcome.verdict.ok() && diagnosis == Diagnose::when_failing;
  if (diagnosed)
    outcome.diagnoses = seen != nullptr && seen->diagnoses ? *seen->diagnoses
                                                           : diagnose(batch.view(), k, got, outcome.verdict, judged_by);
  if (judged != nullptr) {
    if (seen == nullptr) seen = &judged->add(std::move(got), judged_by, outcome.verdict);
    if (diagnosed) seen->diagnoses = outcome.diagnoses;
  }
  return outcome;
}

JudgedResults::Judged* JudgedResults::find(const ResultData& got, const Tolerance& tolerance) {
  for (Judged& j : judged_)
    if (j.tolerance == tolerance && same_bits(j.result, got)) return &j;
  return nullptr;
}

JudgedResults::Judged& JudgedResults::add(ResultData got, const Tolerance& tolerance, Verdict verdict) {
  return judged_.emplace_back(Judged{std::move(got), tolerance, std::move(verdict), std::nullopt});
}

Verdict judge_against_reference(const BatchData& batch, std::uint32_t k, const ResultData& got,
                                const Tolerance& tolerance, const KeptViolations& kept) {
  return compare_result(batch, k, run_backend(reference_backend(), batch, k), got, tolerance, kept);
}

}  // namespace logprobs
