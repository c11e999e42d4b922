// What is wrong, when a result disagrees: the common logprobs kernel bugs recognised by their
// fingerprints (issue 22). The comparator says which rules broke where; the diagnosis reads the
// rows that failed again, beside the input, and names the class of bug that explains them.
//
// It never changes a verdict: it is a summary above the violations, and a violation that fits no
// class is left as it is. It costs nothing on a passing result (no row failed, nothing is read),
// and on a failing one it reads only the failing rows (and, for rows_permuted, the other rows'
// normalizers). It works from Verdict::failed_rows, never from the violations, so it does not
// depend on every violation being kept. It reads at most the first kDiagnosedRows failing rows:
// the fingerprints are the same on a few thousand rows as on millions, and what it keeps per row
// (about 1.4 KB) stays bounded whatever a result gets wrong; the evidence then says so.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comparator.hpp"

namespace logprobs {

// Each class's name is stable (users grep for it, CI parsers read it): bug_class_name.
enum class BugClass : std::uint8_t {
  normalizer_shift,            // every value of a row off by one amount d, right relative to each other
  normalizer_extra_mass,       // S too large by one absolute mass on every row (padding, masked entries read as 0)
  normalizer_missing_mass,     // S too small: the sum over each row's top N, or a truncated row
  values_rounded_bf16,         // every value on the bf16 grid
  values_rounded_f16,          // every value on the f16 grid
  temperature_not_applied,     // the values of the reference at T = 1
  temperature_inverted,        // the values of the reference at x * T
  neg_inf_clamped,             // -inf values (masked tokens, padding) replaced by a finite constant
  nan_not_propagated,          // a row with NaN or +inf (SPEC §3) reported finite
  evaluated_token_misaligned,  // the last slot evaluates a neighbour of s in the ragged token array
  rows_permuted,               // an output row holds another logit row's answer
  tokens_off_by_one,           // top tokens one index away from tokens with the right x
  topk_not_exact,              // tokens outside the true top K, their values right
  padding_count_wrong,         // more or fewer padding slots than SPEC §2.7 asks
  rank_strict,                 // ranks counting x_j > x_s instead of x_j >= x_s
};
inline constexpr int kBugClassCount = 15;

inline constexpr std::uint64_t kDiagnosedRows = 4096;

// "normalizer_shift", ..., "rank_strict"; and back (nothing for another name).
const char* bug_class_name(BugClass bug);
std::optional<BugClass> bug_class_from_name(std::string_view name);

struct Diagnosis {
  BugClass bug = BugClass::normalizer_shift;
  std::vector<std::uint64_t> rows;  // the output rows it explains, ascending
  // One sentence: the rows, what is seen on them and the likely cause, e.g. "rows 0-63: every
  // value 0.0001 to 0.0131 below the reference, as if about 128 more entries of logit 0 had been
  // summed in S: entries counted that should not be, such as vocabulary padding".
  std::string evidence;
  const char* name() const { return bug_class_name(bug); }
  std::string message() const { return std::string(name()) + ": " + evidence; }
};

// The classes that explain `verdict`, the comparator's verdict on `got` for `batch` at top-K
// width `k` under `tolerance`, in the order of BugClass; empty when the verdict passed or no
// failing row fits a class. A row may be explained by more than one class when they cover
// different rules (a rank_strict row may also be a values_rounded_bf16 one).
std::vector<Diagnosis> diagnose(const RaggedBatch& batch, std::uint32_t k, const ResultData& got,
                                const Verdict& verdict, const Tolerance& tolerance = {});

// "row 5", "rows 0-63", "rows 0-3, 7, 9-11", with at most a few ranges and then "and N more".
std::string rows_text(std::span<const std::uint64_t> rows);

}  // namespace logprobs
