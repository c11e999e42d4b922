// The public contract, part 1: what a ragged batch and its outputs are (SPEC §1, §2).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace logprobs {

inline constexpr int kMaxLevels = 16;

// K = 2^levels - 1 top slots (none when levels = 0).
constexpr std::uint32_t top_k(int levels) { return levels <= 0 ? 0u : (1u << levels) - 1u; }

// W = 2^levels slots per output row: the K top slots, then the evaluated token's slot.
constexpr std::uint32_t slots_per_row(int levels) { return top_k(levels) + 1u; }

// A ragged batch as SPEC §1 lays it out. A non-owning view: the caller keeps the memory alive.
// B, the number of batch items, is sampled_tokens.size(); each offset array has B + 1 entries.
struct RaggedBatch {
  const float* logits = nullptr;  // [rows, row_stride]; the first `vocab` entries of a row count
  std::uint64_t rows = 0;
  std::uint64_t vocab = 0;
  std::uint64_t row_stride = 0;
  std::span<const std::uint32_t> tokens;
  std::span<const std::uint32_t> sampled_tokens;
  std::span<const std::uint32_t> logit_row_offsets;
  std::span<const std::uint32_t> token_row_offsets;
  std::span<const std::uint32_t> lp_output_offsets;

  std::uint64_t batch_size() const { return sampled_tokens.size(); }
  std::uint64_t output_rows() const { return lp_output_offsets.empty() ? 0 : lp_output_offsets.back(); }
  std::span<const float> logit_row(std::uint64_t i) const { return {logits + i * row_stride, vocab}; }
};

// The outputs lp_logits and lp_tokens, both [rows, width] row-major. A non-owning view.
struct LogprobsOutput {
  std::span<float> lp_logits;
  std::span<std::uint32_t> lp_tokens;
  std::uint64_t rows = 0;
  std::uint64_t width = 0;

  // The `width` slots of output row `row`.
  float* row_values(std::uint64_t row) const { return lp_logits.data() + row * width; }
  std::uint32_t* row_tokens(std::uint64_t row) const { return lp_tokens.data() + row * width; }
};

// What one output row reads (SPEC §2 steps 1-4).
struct RowTask {
  std::uint64_t output_row;
  std::uint64_t logit_row;
  std::uint32_t token;  // the evaluated token s
};

// The tasks of every output row, in output-row order. Requires a validated batch.
std::vector<RowTask> plan_rows(const RaggedBatch& batch);

}  // namespace logprobs
