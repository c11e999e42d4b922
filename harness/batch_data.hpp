// Owning counterparts of the contract's views, for the harness, tests, benchmarks and files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "logprobs/backend.hpp"

namespace logprobs {

// A ragged batch that owns its arrays. view() is valid while the BatchData lives unchanged.
struct BatchData {
  std::vector<float> logits;  // f32 batches: rows * row_stride
  std::uint64_t rows = 0;
  std::uint64_t vocab = 0;
  std::uint64_t row_stride = 0;
  std::vector<std::uint32_t> tokens;
  std::vector<std::uint32_t> sampled_tokens;
  std::vector<std::uint32_t> logit_row_offsets;
  std::vector<std::uint32_t> token_row_offsets;
  std::vector<std::uint32_t> lp_output_offsets;
  std::optional<std::vector<float>> temperatures;  // [B] when given
  LogitsDtype dtype = LogitsDtype::f32;
  std::vector<std::uint16_t> logits16;  // bf16 and f16 batches: rows * row_stride bit patterns
  // Or, for a batch read from a file, the logits in place in the file's read-only mapping, which
  // `logits_owner` keeps alive (read_batch_file): then `logits` and `logits16` are empty, and
  // view(), logit() and logit_bytes() read these; own_logits() copies them for code that edits.
  std::span<const std::byte> mapped_logits;
  std::shared_ptr<const void> logits_owner;

  RaggedBatch view() const;
  // Row i of an f32 batch that owns its logits.
  float* row(std::uint64_t i) { return logits.data() + i * row_stride; }
  // Logit (i, j) widened to f32, before any temperature.
  float logit(std::uint64_t i, std::uint64_t j) const;
  // Every stored logit's bytes, in the batch's dtype, wherever they are kept.
  std::span<const std::byte> logit_bytes() const;
  // Copies mapped logits into `logits` or `logits16` and lets the mapping go (nothing when the
  // batch already owns them).
  void own_logits();
};

// Outputs that own their arrays: lp_logits and lp_tokens [rows, width], lp_ranks [rows] when
// ranks are asked for.
struct ResultData {
  std::vector<float> lp_logits;
  std::vector<std::uint32_t> lp_tokens;
  std::uint64_t rows = 0;
  std::uint64_t width = 0;
  bool ranks = false;
  std::vector<std::uint32_t> lp_ranks;

  ResultData() = default;
  ResultData(std::uint64_t rows_, std::uint64_t width_, bool ranks_ = false)
      : lp_logits(rows_ * width_),
        lp_tokens(rows_ * width_),
        rows(rows_),
        width(width_),
        ranks(ranks_),
        lp_ranks(ranks_ ? rows_ : 0) {}
  LogprobsOutput view() { return {lp_logits, lp_tokens, rows, width, ranks, lp_ranks}; }
  float value(std::uint64_t row, std::uint64_t slot) const { return lp_logits[row * width + slot]; }
  std::uint32_t token(std::uint64_t row, std::uint64_t slot) const { return lp_tokens[row * width + slot]; }
};

// Bitwise equality, which treats NaN payloads as bits (SPEC §6 determinism); ranks included.
bool same_bits(const ResultData& a, const ResultData& b);

// The same, for output row `row_a` of `a` against output row `row_b` of `b`.
bool same_row_bits(const ResultData& a, std::uint64_t row_a, const ResultData& b, std::uint64_t row_b);

// The batch of one batch item, one f32 logit row `x` and one output row evaluating `token`: a
// row of a larger batch computed alone (SPEC §6 batch invariance), or a row written by hand.
BatchData single_row_batch(std::span<const float> x, std::uint32_t token);

// The batch of output row `task` of `batch` alone, in the batch's dtype, with its temperature.
BatchData row_alone(const BatchData& batch, const RowTask& task);

// The batch without batch item b: its logit rows, tokens, output rows, sampled token and
// temperature go, and the later items' offsets move down by what went. Rows and tokens outside
// every item (leading and trailing ones) stay. A valid batch stays valid (SPEC §4).
BatchData without_item(const BatchData& batch, std::size_t b);

// Validates, allocates outputs of the right shape and runs the backend at top-K width `k`.
ResultData run_backend(const Backend& backend, const BatchData& batch, std::uint32_t k, bool ranks = false);

}  // namespace logprobs
