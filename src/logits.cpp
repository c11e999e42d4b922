// SPEC §2.5: logits of any dtype, widened exactly to f32, then divided by the temperature.
#include <bit>
#include <cmath>
#include <cstring>

#include "logprobs/batch.hpp"

namespace logprobs {

std::string_view dtype_name(LogitsDtype dtype) {
  switch (dtype) {
    case LogitsDtype::f32:
      return "F32";
    case LogitsDtype::bf16:
      return "BF16";
    case LogitsDtype::f16:
      return "F16";
  }
  return "unknown";
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  // Infinities and NaN keep their payload, shifted into the f32 mantissa's top bits.
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

namespace {

// The 16-bit logit j of a row at any alignment.
std::uint16_t bits_at(const std::byte* row, std::size_t j) {
  std::uint16_t bits;
  std::memcpy(&bits, row + 2 * j, 2);
  return bits;
}

}  // namespace

void read_row(const RaggedBatch& batch, const RowTask& task, std::span<float> x) {
  const std::byte* row = batch.row_bytes(task.logit_row);
  switch (batch.dtype) {
    case LogitsDtype::f32:
      std::memcpy(x.data(), row, x.size() * sizeof(float));
      break;
    case LogitsDtype::bf16:
      for (std::size_t j = 0; j < x.size(); ++j) x[j] = bf16_to_f32(bits_at(row, j));
      break;
    case LogitsDtype::f16:
      for (std::size_t j = 0; j < x.size(); ++j) x[j] = f16_to_f32(bits_at(row, j));
      break;
  }
  if (batch.has_temperatures()) {
    const float t = (*batch.temperatures)[task.batch_item];
    for (float& v : x) v = v / t;
  }
}

}  // namespace logprobs
