// The large-index device test's logits (test_cuda_backend.cpp): a formula of each entry's 64-bit
// index, computed on the device to fill gigabytes (test_cuda_fill.cu) and on the host for the few
// rows the test checks against the canonical backend.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LOGPROBS_FILL_HD __host__ __device__
#else
#define LOGPROBS_FILL_HD inline
#endif

namespace logprobs::cuda_test {

// The bf16 bits of entry `index`: splitmix64 of it, so a read of the wrong entry (a 32-bit index
// that wrapped) shows; values of either sign in [2^-7, 8), with ties (7 mantissa bits).
LOGPROBS_FILL_HD std::uint16_t large_fill_bits(std::uint64_t index) {
  std::uint64_t z = index + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const std::uint32_t exponent = 120u + std::uint32_t(z % 10u);
  const std::uint32_t mantissa = std::uint32_t(z >> 8) & 0x7Fu;
  const std::uint32_t sign = std::uint32_t(z >> 20) & 1u;
  return std::uint16_t((sign << 15) | (exponent << 7) | mantissa);
}

// Entries [0, count) of `device` (bf16 bits) by large_fill_bits; the CUDA error as an int.
int fill_large_logits(std::uint16_t* device, std::uint64_t count);

}  // namespace logprobs::cuda_test
