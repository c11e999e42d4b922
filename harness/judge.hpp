// One backend run on one batch and judged against the reference's result (SPEC §5): what the
// campaign, `compare` and the tests do for every case.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "comparator.hpp"
#include "diagnosis.hpp"

namespace logprobs {

struct BackendOutcome {
  Verdict verdict;
  std::string error;    // what the backend threw, if it threw (then verdict is empty)
  std::string skipped;  // the optional part the backend lacks for this case (then it did not run)
  // For a backend that claims SPEC §8, where its bits first differ from the canonical result's.
  std::string canonical_difference;
  double seconds = 0;  // time spent in the backend's run()
  std::vector<Diagnosis> diagnoses;  // what the diagnosis names when the verdict failed (and was asked for)
  bool ok() const { return error.empty() && verdict.ok() && canonical_difference.empty(); }
};

// Where `got` first differs in bits from `want` (shape, then row by row: tokens, values, rank),
// or "" when every bit is the same. NaN payloads count as bits.
std::string first_bit_difference(const ResultData& got, const ResultData& want);

// The tolerance `backend` is judged by: `tolerance`, with the linear sum rule when the backend
// declares one f32 chain (SPEC §5).
Tolerance tolerance_for(const Backend& backend, Tolerance tolerance);

// Runs `backend` on `batch` at top-K width `k`, asking for ranks when `ranks` (an exception it
// throws becomes outcome.error), and judges the result against `reference`, the reference
// backend's result for the same batch and K. A backend lacking an optional part the case needs
// (SPEC §4) is not run: outcome.skipped names the part. When `canonical` is given (the canonical
// backend's result, ranks as asked) and the backend claims SPEC §8, its bits must equal it. A
// failing verdict is diagnosed unless `diagnosis` says no (a shrinker asks only whether it fails).
// The verdict keeps the violations `kept` says. With `judged`, a result whose bits equal one
// judged before on the same case is given that one's verdict (see JudgedResults).
enum class Diagnose : bool { no, when_failing };
class JudgedResults;
BackendOutcome judge_backend(const Backend& backend, const BatchData& batch, std::uint32_t k, bool ranks,
                             const ResultData& reference, const Tolerance& tolerance,
                             const ResultData* canonical = nullptr, Diagnose diagnosis = Diagnose::when_failing,
                             const KeptViolations& kept = {}, JudgedResults* judged = nullptr);

// The verdicts given on one case (one batch, K, reference result and KeptViolations), by result.
// compare_result and diagnose are functions of their inputs, so a result with the same bits as
// one judged before by the same tolerance takes its verdict and diagnoses without being judged
// again: the campaign's backends that claim SPEC §8 (the canonical one, cpu and each of its
// variants) give one result between them, judged once. Each distinct result is kept.
class JudgedResults {
 public:
  struct Judged {
    ResultData result;
    Tolerance tolerance;
    Verdict verdict;
    std::optional<std::vector<Diagnosis>> diagnoses;  // once its failing verdict was diagnosed
  };
  // The result with `got`'s bits judged by `tolerance`, or nullptr.
  Judged* find(const ResultData& got, const Tolerance& tolerance);
  Judged& add(ResultData got, const Tolerance& tolerance, Verdict verdict);
  std::size_t size() const { return judged_.size(); }  // the results judged

 private:
  std::vector<Judged> judged_;
};

// The canonical backend's result for the case, or nothing when the build has no such backend or
// none of `backends` claims SPEC §8 (so there is nothing to hold to it).
std::optional<ResultData> canonical_result(std::span<const Backend* const> backends, const BatchData& batch,
                                           std::uint32_t k, bool ranks);

// `got`, from any implementation, judged against the reference backend's result for the batch.
Verdict judge_against_reference(const BatchData& batch, std::uint32_t k, const ResultData& got,
                                const Tolerance& tolerance = {}, const KeptViolations& kept = {});

}  // namespace logprobs
