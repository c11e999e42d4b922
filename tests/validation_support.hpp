// The tests of SPEC §4: a valid base batch to break one rule of at a time, a backend that only
// records whether compute() ran, and the two verdicts: rejected (InvalidBatch naming every given
// part, from validate_batch and from Backend::run alike, without compute()) and accepted.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "harness/batch_data.hpp"

namespace logprobs::validation {

inline constexpr std::uint32_t kU32Max = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint32_t kK = 3;  // W = 4

// V = 4, 7 logit rows, B = 3:
//   batch 0: logit rows [0, 3), tokens [0, 2), 3 output rows: reads tokens[0], tokens[1], sampled[0]
//   batch 1: logit row  [3, 4), tokens [2, 4), no output rows: reads nothing
//   batch 2: logit rows [4, 7), tokens [4, 6), 2 output rows: reads tokens[5], sampled[2]
// so N = 5, and tokens[2], tokens[3], tokens[4] and sampled[1] are never read.
inline BatchData valid_batch() {
  BatchData batch;
  batch.rows = 7;
  batch.vocab = 4;
  batch.row_stride = 4;
  batch.logits.assign(batch.rows * batch.row_stride, 0.5f);
  batch.tokens = {1, 2, 3, 0, 3, 2};
  batch.sampled_tokens = {0, 3, 1};
  batch.logit_row_offsets = {0, 3, 4, 7};
  batch.token_row_offsets = {0, 2, 4, 6};
  batch.lp_output_offsets = {0, 3, 3, 5};
  return batch;
}

// A backend that only records whether compute() ran; it implements the optional parts given.
class SpyBackend final : public Backend {
 public:
  explicit SpyBackend(Features features = Features::all()) : features_(features) {}
  std::string_view name() const override { return "spy"; }
  std::string_view description() const override { return "records compute() calls"; }
  Features features() const override { return features_; }
  mutable int compute_calls = 0;

 protected:
  void compute(const RaggedBatch&, std::uint32_t, const LogprobsOutput&) const override { ++compute_calls; }

 private:
  Features features_;
};

// Outputs of the shape the batch asks for (K clamped, so that a bad K is the only fault).
inline ResultData outputs_for(const RaggedBatch& batch, std::uint32_t k) {
  return ResultData(batch.output_rows(), slots_per_row(std::min(k, kMaxK)));
}

// validate_batch throws InvalidBatch whose message holds every part; Backend::run throws it too
// and never calls compute().
inline ::testing::AssertionResult rejected(const RaggedBatch& batch, std::uint32_t k, ResultData out,
                                           std::initializer_list<std::string_view> parts) {
  std::string message;
  try {
    validate_batch(batch, k, out.view());
    return ::testing::AssertionFailure() << "validate_batch accepted the batch";
  } catch (const InvalidBatch& e) {
    message = e.what();
  }
  for (std::string_view part : parts) {
    if (message.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
  }
  const SpyBackend spy;
  try {
    spy.run(batch, k, out.view());
    return ::testing::AssertionFailure() << "Backend::run accepted the batch";
  } catch (const InvalidBatch& e) {
    if (e.what() != message) return ::testing::AssertionFailure() << "run gave another message: " << e.what();
  }
  if (spy.compute_calls != 0) return ::testing::AssertionFailure() << "compute() ran on an invalid batch";
  return ::testing::AssertionSuccess() << message;
}

inline ::testing::AssertionResult rejected(const RaggedBatch& batch, std::uint32_t k,
                                           std::initializer_list<std::string_view> parts) {
  return rejected(batch, k, outputs_for(batch, k), parts);
}

inline ::testing::AssertionResult rejected(const BatchData& batch, std::uint32_t k,
                                           std::initializer_list<std::string_view> parts) {
  return rejected(batch.view(), k, parts);
}

// validate_batch accepts, and Backend::run calls compute() exactly once.
inline ::testing::AssertionResult accepted(const RaggedBatch& batch, std::uint32_t k) {
  ResultData out = outputs_for(batch, k);
  try {
    validate_batch(batch, k, out.view());
    const SpyBackend spy;
    spy.run(batch, k, out.view());
    if (spy.compute_calls != 1)
      return ::testing::AssertionFailure() << "compute() ran " << spy.compute_calls << " times";
  } catch (const InvalidBatch& e) {
    return ::testing::AssertionFailure() << "rejected: " << e.what();
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult accepted(const BatchData& batch, std::uint32_t k) {
  return accepted(batch.view(), k);
}

}  // namespace logprobs::validation
