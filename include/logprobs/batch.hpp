// The public contract, part 1: what a ragged batch and its outputs are (SPEC §1, §2).
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace logprobs {

// The version of SPEC.md this build implements; reports carry it, so results judged under
// different contracts are never merged or compared as one.
inline constexpr int kContractVersion = 3;

// K, the top-K width, is 0..kMaxK. MAX's `levels` L (0..kMaxLevels) is the form K = 2^L - 1.
inline constexpr std::uint32_t kMaxK = 65535;
inline constexpr int kMaxLevels = 16;

// K = 2^levels - 1 top slots (none when levels = 0).
constexpr std::uint32_t top_k(int levels) { return levels <= 0 ? 0u : (1u << levels) - 1u; }

// W = K + 1 slots per output row: the K top slots, then the evaluated token's slot.
constexpr std::uint64_t slots_per_row(std::uint32_t k) { return std::uint64_t{k} + 1; }

// The element type of the logits. A 16-bit value widens exactly to f32 (SPEC §2.5).
enum class LogitsDtype : std::uint8_t { f32, bf16, f16 };

// "F32", "BF16", "F16": the safetensors names, used in messages and files.
std::string_view dtype_name(LogitsDtype dtype);
constexpr std::uint64_t dtype_bytes(LogitsDtype dtype) { return dtype == LogitsDtype::f32 ? 4 : 2; }

// Inline: the judge widens every entry of a bf16 row, and a loop of this shift vectorizes.
inline float bf16_to_f32(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
float f16_to_f32(std::uint16_t bits);

// A ragged batch as SPEC §1 lays it out. A non-owning view: the caller keeps the memory alive.
// B, the number of batch items, is sampled_tokens.size(); each offset array has B + 1 entries.
struct RaggedBatch {
  const void* logits = nullptr;  // [rows, row_stride] elements of `dtype`; the first `vocab` of a row count
  LogitsDtype dtype = LogitsDtype::f32;
  std::uint64_t rows = 0;
  std::uint64_t vocab = 0;
  std::uint64_t row_stride = 0;
  std::span<const std::uint32_t> tokens;
  std::span<const std::uint32_t> sampled_tokens;
  std::span<const std::uint32_t> logit_row_offsets;
  std::span<const std::uint32_t> token_row_offsets;
  std::span<const std::uint32_t> lp_output_offsets;
  std::optional<std::span<const float>> temperatures;  // [B] when given (SPEC §2.5)

  std::uint64_t batch_size() const { return sampled_tokens.size(); }
  std::uint64_t output_rows() const { return lp_output_offsets.empty() ? 0 : lp_output_offsets.back(); }
  bool has_temperatures() const { return temperatures.has_value(); }
  // Logit row i of an f32 batch.
  std::span<const float> logit_row(std::uint64_t i) const {
    return {static_cast<const float*>(logits) + i * row_stride, vocab};
  }
  // The first element of logit row i, of `dtype_bytes(dtype)` bytes each.
  const std::byte* row_bytes(std::uint64_t i) const {
    return static_cast<const std::byte*>(logits) + i * row_stride * dtype_bytes(dtype);
  }
};

// The outputs lp_logits and lp_tokens, both [rows, width] row-major, and, when ranks are asked
// for, lp_ranks [rows] (SPEC §2.9). A non-owning view.
struct LogprobsOutput {
  std::span<float> lp_logits;
  std::span<std::uint32_t> lp_tokens;
  std::uint64_t rows = 0;
  std::uint64_t width = 0;
  bool ranks = false;  // lp_ranks asked for
  std::span<std::uint32_t> lp_ranks;

  // The `width` slots of output row `row`.
  float* row_values(std::uint64_t row) const { return lp_logits.data() + row * width; }
  std::uint32_t* row_tokens(std::uint64_t row) const { return lp_tokens.data() + row * width; }
};

// What one output row reads (SPEC §2 steps 1-4).
struct RowTask {
  std::uint64_t output_row;
  std::uint64_t logit_row;
  std::uint32_t token;       // the evaluated token s
  std::uint32_t batch_item;  // b, whose temperature applies
};

// The tasks of every output row, in output-row order. Requires a validated batch.
std::vector<RowTask> plan_rows(const RaggedBatch& batch);

// SPEC §2.5: the x of a task's row, logits widened exactly to f32 and, with temperatures,
// x_j = fl32(x_j / T_b) (an IEEE f32 division, so T_b = 1 leaves every bit). x.size() is V.
void read_row(const RaggedBatch& batch, const RowTask& task, std::span<float> x);

}  // namespace logprobs
