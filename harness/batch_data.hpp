// Owning counterparts of the contract's views, for the harness, tests, benchmarks and files.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "logprobs/backend.hpp"

namespace logprobs {

// A ragged batch that owns its arrays. view() is valid while the BatchData lives unchanged.
struct BatchData {
  std::vector<float> logits;  // rows * row_stride
  std::uint64_t rows = 0;
  std::uint64_t vocab = 0;
  std::uint64_t row_stride = 0;
  std::vector<std::uint32_t> tokens;
  std::vector<std::uint32_t> sampled_tokens;
  std::vector<std::uint32_t> logit_row_offsets;
  std::vector<std::uint32_t> token_row_offsets;
  std::vector<std::uint32_t> lp_output_offsets;

  RaggedBatch view() const {
    return {logits.data(), rows,           vocab,           row_stride,       tokens,
            sampled_tokens, logit_row_offsets, token_row_offsets, lp_output_offsets};
  }
  float* row(std::uint64_t i) { return logits.data() + i * row_stride; }
};

// Outputs that own their arrays, [rows, width] each.
struct ResultData {
  std::vector<float> lp_logits;
  std::vector<std::uint32_t> lp_tokens;
  std::uint64_t rows = 0;
  std::uint64_t width = 0;

  ResultData() = default;
  ResultData(std::uint64_t rows_, std::uint64_t width_)
      : lp_logits(rows_ * width_), lp_tokens(rows_ * width_), rows(rows_), width(width_) {}
  LogprobsOutput view() { return {lp_logits, lp_tokens, rows, width}; }
  float value(std::uint64_t row, std::uint64_t slot) const { return lp_logits[row * width + slot]; }
  std::uint32_t token(std::uint64_t row, std::uint64_t slot) const { return lp_tokens[row * width + slot]; }
};

// Bitwise equality, which treats NaN payloads as bits (SPEC §6 determinism).
bool same_bits(const ResultData& a, const ResultData& b);

// The same, for output row `row_a` of `a` against output row `row_b` of `b`.
bool same_row_bits(const ResultData& a, std::uint64_t row_a, const ResultData& b, std::uint64_t row_b);

// The batch of one batch item, one logit row `x` and one output row evaluating `token`: a row of a
// larger batch computed alone (SPEC §6 batch invariance), or a row written by hand.
BatchData single_row_batch(std::span<const float> x, std::uint32_t token);

// Validates, allocates outputs of the right shape and runs the backend.
ResultData run_backend(const Backend& backend, const BatchData& batch, int levels);

}  // namespace logprobs
