// What the C API's translation units share: the objects behind its opaque handles, the boundary
// that turns every C++ exception into a status and an error object, and the conversions between
// the C views and the harness's types.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/batch_file.hpp"
#include "harness/comparator.hpp"
#include "harness/diagnosis.hpp"
#include "logprobs/logprobs.h"

struct logprobs_error {
  logprobs_status status;
  std::string message;
};

using MetadataList = std::vector<std::pair<std::string, std::string>>;

struct logprobs_batch {
  logprobs::BatchData data;
  std::optional<std::uint32_t> k;
  MetadataList metadata;
};

struct logprobs_result {
  logprobs::ResultLayout layout = logprobs::ResultLayout::packed;
  logprobs::ResultData packed;
  logprobs::SplitResult split;
  std::optional<std::uint32_t> k;
  MetadataList metadata;
};

// A violation as the C API hands it out: `what` points into `message`, so each text is stored
// once (a badly wrong result can have a violation per value).
struct StoredViolation {
  logprobs::Rule rule;
  std::uint64_t batch, output_row, slot;
  std::uint32_t token;
  std::string message;
  std::size_t what_offset;
  logprobs::RowTolerance tolerance;
};

struct StoredDiagnosis {
  std::string name;  // bug_class_name's, kept beside the texts a C caller reads
  std::vector<std::uint64_t> rows;
  std::string evidence;
  std::string message;
};

struct logprobs_verdict {
  std::vector<StoredViolation> violations;  // the first ones kept
  std::uint64_t violations_found = 0;       // all of them
  std::array<std::uint64_t, logprobs::kRuleCount> rule_counts{};
  std::vector<StoredDiagnosis> diagnoses;  // the diagnosis of a failing verdict (diagnosis.hpp)
  logprobs::ErrorStats stats;
  logprobs_tolerance tolerance;
};

struct BackendEntry {
  std::string name, description, unavailable_reason, variant_of;
  logprobs_backend_info info;
};

struct logprobs_backend_list {
  std::vector<BackendEntry> entries;
};

namespace logprobs::capi {

// An error the API itself reports (a bad argument, an unknown backend), with its status.
class Failure : public std::runtime_error {
 public:
  Failure(logprobs_status status_, const std::string& message) : std::runtime_error(message), status(status_) {}
  logprobs_status status;
};

// Stores an error object in *error (when error is not NULL) and returns the status. Never
// throws: without memory for the object, *error stays NULL and the status still tells.
logprobs_status fail(logprobs_error** error, logprobs_status status, const char* message) noexcept;

// The status of the exception being handled, its message stored through `error`. Called only
// inside a catch block.
logprobs_status fail_with_current_exception(logprobs_error** error) noexcept;

// Runs `body` at the boundary: LOGPROBS_OK when it returns, else the status of what it threw.
template <typename Body>
logprobs_status guarded(logprobs_error** error, Body&& body) noexcept {
  if (error != nullptr) *error = nullptr;
  try {
    body();
    return LOGPROBS_OK;
  } catch (...) {
    return fail_with_current_exception(error);
  }
}

// A NULL argument the function needs.
template <typename T>
T& required(T* pointer, const char* name) {
  if (pointer == nullptr) throw Failure(LOGPROBS_INVALID_ARGUMENT, std::string(name) + " is NULL");
  return *pointer;
}

// The contract's view of a C batch view, after checking that no array is NULL with a count.
RaggedBatch to_batch(const logprobs_batch_view* view);

// The C view of a batch (borrowing its memory).
logprobs_batch_view to_view(const RaggedBatch& batch);

// An owning copy of a batch view's arrays (logits of `rows * row_stride` elements).
BatchData copy_batch(const RaggedBatch& batch);

// A C result view's arrays, copied: into a packed result, or into a split one.
ResultData copy_packed(const logprobs_result_view& view);
SplitResult copy_split(const logprobs_result_view& view);

// The C view of a result object (borrowing its memory).
logprobs_result_view to_view(const logprobs_result& result);

// Metadata given as parallel arrays of C strings.
FileMetadata metadata_of(const char* const* keys, const char* const* values, std::uint64_t count);

// Tolerance checked as the command checks it: each term a finite number >= 0.
Tolerance to_tolerance(const logprobs_tolerance* tolerance);
logprobs_tolerance from_tolerance(const Tolerance& tolerance);

}  // namespace logprobs::capi
