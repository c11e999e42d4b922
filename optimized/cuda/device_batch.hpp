// The batch and outputs of the CUDA backend's API (logprobs_cuda.hpp) as plain structs of
// pointers: the SPEC §1 layout, device pointers for the kernels. Free of CUDA types, so that the
// host model of the kernels (cuda_kernel_model.hpp) runs on the very same structs, with host
// pointers, in a build without CUDA.
#pragma once

#include <cstdint>

namespace logprobs {

// The element type of the logits; 16-bit values are widened exactly to f32 (SPEC §2.5).
enum class DeviceDtype : std::uint8_t { f32, bf16, f16 };

struct DeviceBatch {
  const void* logits = nullptr;  // [rows, row_stride] elements of `dtype`; any element alignment
  DeviceDtype dtype = DeviceDtype::f32;
  std::uint64_t rows = 0;
  std::uint64_t vocab = 0;
  std::uint64_t row_stride = 0;
  const std::uint32_t* tokens = nullptr;
  const std::uint32_t* sampled_tokens = nullptr;     // [B]
  const std::uint32_t* logit_row_offsets = nullptr;  // [B + 1]
  const std::uint32_t* token_row_offsets = nullptr;  // [B + 1]
  const std::uint32_t* lp_output_offsets = nullptr;  // [B + 1]
  const float* temperatures = nullptr;               // [B], or null: no temperatures
  std::uint64_t batch_size = 0;                      // B
  std::uint64_t output_rows = 0;                     // N = lp_output_offsets[B], known to the caller
};

struct DeviceOutput {
  float* lp_logits = nullptr;          // [N, K + 1]
  std::uint32_t* lp_tokens = nullptr;  // [N, K + 1]
  std::uint32_t* lp_ranks = nullptr;   // [N], or null: ranks not asked for (SPEC §2.9)
};

}  // namespace logprobs
