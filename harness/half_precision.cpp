#include "half_precision.hpp"

#include <bit>
#include <cmath>

namespace logprobs {

std::uint16_t f32_to_bf16(float x) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // carries into the exponent, up to infinity, as rounding should
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint16_t f32_to_f16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u | static_cast<std::uint16_t>((magnitude >> 13) & 0x1ffu);
  // 65520 = 65504 (the largest f16) plus half its ulp: from there on, rounding reaches infinity.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  if (magnitude < 0x38800000u) {
    // Below 2^-14, f16 is subnormal: a count of 2^-24. Scaling by 2^24 is exact in f32, and
    // nearbyint rounds to nearest even (the default rounding mode); 1024 is 2^-14 itself.
    return sign | static_cast<std::uint16_t>(std::nearbyint(std::bit_cast<float>(magnitude) * 16777216.0f));
  }
  std::uint32_t half = (((magnitude >> 23) - 127 + 15) << 10) | ((magnitude >> 13) & 0x3ffu);
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry moves to the next binade
  return sign | static_cast<std::uint16_t>(half);
}

float round_to(LogitsDtype dtype, float x) {
  switch (dtype) {
    case LogitsDtype::bf16:
      return bf16_to_f32(f32_to_bf16(x));
    case LogitsDtype::f16:
      return f16_to_f32(f32_to_f16(x));
    case LogitsDtype::f32:
      break;
  }
  return x;
}

BatchData with_dtype(const BatchData& f32_batch, LogitsDtype dtype) {
  BatchData out = f32_batch;
  if (dtype == LogitsDtype::f32) return out;
  out.own_logits();
  out.dtype = dtype;
  out.logits16.resize(out.logits.size());
  const auto narrow = dtype == LogitsDtype::bf16 ? f32_to_bf16 : f32_to_f16;
  for (std::size_t i = 0; i < out.logits.size(); ++i) out.logits16[i] = narrow(out.logits[i]);
  out.logits.clear();
  return out;
}

BatchData widened_to_f32(const BatchData& batch) {
  BatchData out = batch;
  if (batch.dtype == LogitsDtype::f32) return out;
  out.own_logits();
  out.dtype = LogitsDtype::f32;
  out.logits.resize(out.logits16.size());
  const auto widen = batch.dtype == LogitsDtype::bf16 ? bf16_to_f32 : f16_to_f32;
  for (std::size_t i = 0; i < out.logits16.size(); ++i) out.logits[i] = widen(out.logits16[i]);
  out.logits16.clear();
  return out;
}

}  // namespace logprobs
