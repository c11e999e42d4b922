// The C API's judging: any implementation's result, in either layout, against the input and the
// reference (SPEC §5, §6), through the one comparator.
#include <fmt/format.h>

#include <memory>

#include "capi_support.hpp"

using namespace logprobs;
using logprobs::capi::Failure;
using logprobs::capi::guarded;
using logprobs::capi::required;

// The C rule numbers are the comparator's, in its order.
static_assert(LOGPROBS_RULE_SHAPE == static_cast<int>(Rule::shape));
static_assert(LOGPROBS_RULE_LAST_TOKEN == static_cast<int>(Rule::last_token));
static_assert(LOGPROBS_RULE_TOKEN_RANGE == static_cast<int>(Rule::token_range));
static_assert(LOGPROBS_RULE_DUPLICATE_TOKEN == static_cast<int>(Rule::duplicate_token));
static_assert(LOGPROBS_RULE_NOT_CANDIDATE == static_cast<int>(Rule::not_candidate));
static_assert(LOGPROBS_RULE_NOT_TOP == static_cast<int>(Rule::not_top));
static_assert(LOGPROBS_RULE_PADDING_COUNT == static_cast<int>(Rule::padding_count));
static_assert(LOGPROBS_RULE_VALUE == static_cast<int>(Rule::value));
static_assert(LOGPROBS_RULE_RANK == static_cast<int>(Rule::rank));
static_assert(LOGPROBS_RULE_GREEDY_EXACT == static_cast<int>(Rule::greedy_exact));
static_assert(LOGPROBS_SUM_CALIBRATED == static_cast<int>(SumRule::calibrated));
static_assert(LOGPROBS_SUM_LINEAR == static_cast<int>(SumRule::linear));
static_assert(LOGPROBS_SUM_SQRT == static_cast<int>(SumRule::sqrt));

namespace {

// The result a view describes, as the packed layout the comparator reads.
ResultData packed_result(const RaggedBatch& batch, const logprobs_result_view& got) {
  switch (got.layout) {
    case LOGPROBS_PACKED:
      return capi::copy_packed(got);
    case LOGPROBS_SPLIT:
      return packed_from_split(batch, capi::copy_split(got));
    default:
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("result layout {} is neither LOGPROBS_PACKED nor LOGPROBS_SPLIT", got.layout));
  }
}

std::unique_ptr<logprobs_verdict> stored(Verdict&& verdict, const Tolerance& tolerance,
                                         std::vector<Diagnosis>&& diagnoses) {
  auto owned = std::make_unique<logprobs_verdict>();
  for (Diagnosis& d : diagnoses)
    owned->diagnoses.push_back({d.name(), std::move(d.rows), d.evidence, d.message()});
  owned->stats = verdict.stats;
  owned->violations_found = verdict.violation_count;
  owned->rule_counts = verdict.rule_counts;
  owned->tolerance = capi::from_tolerance(tolerance);
  owned->violations.reserve(verdict.violations.size());
  for (Violation& v : verdict.violations) {
    std::string message = v.message();
    const std::size_t what_offset = message.size() - v.what.size();  // message() ends with `what`
    v.what = {};
    owned->violations.push_back(
        {v.rule, v.batch, v.output_row, v.slot, v.token, std::move(message), what_offset, v.tolerance});
  }
  return owned;
}

}  // namespace

extern "C" {

void logprobs_tolerance_default(logprobs_tolerance* tolerance) {
  if (tolerance == nullptr) return;
  *tolerance = capi::from_tolerance(Tolerance{});
}

const char* logprobs_sum_rule_name(int32_t sum_rule) {
  if (sum_rule < LOGPROBS_SUM_CALIBRATED || sum_rule > LOGPROBS_SUM_SQRT) return "unknown";
  return logprobs::sum_rule_name(static_cast<SumRule>(sum_rule));
}

const char* logprobs_rule_name(int32_t rule) {
  if (rule < LOGPROBS_RULE_SHAPE || rule > LOGPROBS_RULE_GREEDY_EXACT) return "unknown";
  return logprobs::rule_name(static_cast<Rule>(rule));
}

logprobs_status logprobs_judge(const logprobs_batch_view* batch, uint32_t k, const logprobs_result_view* got,
                               const logprobs_tolerance* tolerance, logprobs_verdict** verdict,
                               logprobs_error** error) {
  return logprobs_judge_keeping(batch, k, got, tolerance, LOGPROBS_DEFAULT_KEPT_VIOLATIONS, verdict, error);
}

logprobs_status logprobs_judge_keeping(const logprobs_batch_view* batch, uint32_t k, const logprobs_result_view* got,
                                       const logprobs_tolerance* tolerance, uint64_t max_kept,
                                       logprobs_verdict** verdict, logprobs_error** error) {
  return guarded(error, [&] {
    required(verdict, "verdict");
    const RaggedBatch view = capi::to_batch(batch);
    const Tolerance judged_by = capi::to_tolerance(tolerance);
    // Validated before the split layout is mapped, which reads the batch's row plan.
    const OutputShape shape = validate_batch(view, k);
    const ResultData result = packed_result(view, required(got, "got"));
    ResultData reference(shape.rows, shape.width);
    reference_backend().run(view, k, reference.view());
    Verdict judged = compare_result(view, k, reference, result, judged_by, {.max_kept = max_kept});
    // Only a failing verdict is diagnosed: a passing one costs nothing more.
    std::vector<Diagnosis> diagnoses;
    if (!judged.ok()) diagnoses = diagnose(view, k, result, judged, judged_by);
    *verdict = stored(std::move(judged), judged_by, std::move(diagnoses)).release();
  });
}

int32_t logprobs_verdict_ok(const logprobs_verdict* verdict) {
  return verdict != nullptr && verdict->violations_found == 0 ? 1 : 0;
}

uint64_t logprobs_verdict_violations_found(const logprobs_verdict* verdict) {
  return verdict == nullptr ? 0 : verdict->violations_found;
}

uint64_t logprobs_verdict_rule_count(const logprobs_verdict* verdict, int32_t rule) {
  if (verdict == nullptr || rule < LOGPROBS_RULE_SHAPE || rule > LOGPROBS_RULE_GREEDY_EXACT) return 0;
  return verdict->rule_counts[static_cast<std::size_t>(rule)];
}

uint64_t logprobs_verdict_violation_count(const logprobs_verdict* verdict) {
  return verdict == nullptr ? 0 : verdict->violations.size();
}

logprobs_status logprobs_verdict_violation(const logprobs_verdict* verdict, uint64_t index,
                                           logprobs_violation* violation, logprobs_error** error) {
  return guarded(error, [&] {
    const logprobs_verdict& v = required(verdict, "verdict");
    if (index >= v.violations.size())
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("violation index {} is past the end ({} violations kept of {})", index,
                                v.violations.size(), v.violations_found));
    const StoredViolation& s = v.violations[index];
    logprobs_violation& out = required(violation, "violation");
    out.rule = static_cast<std::int32_t>(s.rule);
    out.rule_name = logprobs::rule_name(s.rule);
    out.batch = s.batch;
    out.output_row = s.output_row;
    out.slot = s.slot;
    out.token = s.token;
    out.message = s.message.c_str();
    out.what = s.message.c_str() + s.what_offset;
    out.sum_rule = static_cast<std::int32_t>(s.tolerance.sum_rule);
    out.dev = s.tolerance.dev;
    out.sum_err = s.tolerance.sum_err;
  });
}

void logprobs_verdict_stats(const logprobs_verdict* verdict, logprobs_stats* stats) {
  if (stats == nullptr) return;
  *stats = {};
  if (verdict == nullptr) return;
  stats->rows = verdict->stats.rows;
  stats->values = verdict->stats.values;
  stats->max_abs_error = verdict->stats.max_abs_error;
  stats->max_ulp_error = verdict->stats.max_ulp_error;
  stats->max_tolerance_used = verdict->stats.max_tolerance_used;
  stats->tolerance = verdict->tolerance;
  if (const auto& at = verdict->stats.max_tolerance_row) {
    stats->max_tolerance_row = {1,
                                at->batch,
                                at->output_row,
                                at->shape.kind(),
                                at->shape.vocab,
                                at->shape.top_probability,
                                at->shape.masked,
                                static_cast<std::int32_t>(at->tolerance.sum_rule),
                                at->tolerance.dev,
                                at->tolerance.sum_err};
  }
}

uint64_t logprobs_verdict_diagnosis_count(const logprobs_verdict* verdict) {
  return verdict == nullptr ? 0 : verdict->diagnoses.size();
}

logprobs_status logprobs_verdict_diagnosis(const logprobs_verdict* verdict, uint64_t index,
                                           logprobs_diagnosis* diagnosis, logprobs_error** error) {
  return guarded(error, [&] {
    const logprobs_verdict& v = required(verdict, "verdict");
    if (index >= v.diagnoses.size())
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("diagnosis index {} is past the end ({} diagnoses)", index, v.diagnoses.size()));
    const StoredDiagnosis& d = v.diagnoses[index];
    logprobs_diagnosis& out = required(diagnosis, "diagnosis");
    out.name = d.name.c_str();
    out.rows = d.rows.data();
    out.row_count = d.rows.size();
    out.evidence = d.evidence.c_str();
    out.message = d.message.c_str();
  });
}

void logprobs_verdict_free(logprobs_verdict* verdict) { delete verdict; }

}  // extern "C"
