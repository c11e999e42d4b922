// The CUDA backend's API for servers: every array already on the device, work queued on the
// caller's stream, nothing synchronized, nothing allocated.
//
//   DeviceBatch batch{...};                  // device pointers, the SPEC §1 layout
//   std::size_t bytes = cuda_workspace_bytes(batch.output_rows, batch.vocab, levels);
//   void* workspace;  cudaMallocAsync(&workspace, bytes, stream);   // reusable across calls
//   cudaError_t err = cuda_logprobs(batch, levels, out, workspace, bytes, stream);
//
// The batch must already be valid (SPEC §4): this path reads the offsets only on the device, so
// it cannot check them. Validate the host copies with logprobs::validate_batch first, as the
// registered backend `cuda` does before it copies anything. Outputs are [N, W] row-major, W =
// 2^levels. Results are bitwise deterministic and batch-invariant (SPEC §6): a row's bits depend
// on its logits, its token, V and levels, not on the stream, the other rows or the workspace size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace logprobs {

struct DeviceBatch {
  const float* logits = nullptr;  // [rows, row_stride]; any 4-byte alignment
  std::uint64_t rows = 0;
  std::uint64_t vocab = 0;
  std::uint64_t row_stride = 0;
  const std::uint32_t* tokens = nullptr;
  const std::uint32_t* sampled_tokens = nullptr;     // [B]
  const std::uint32_t* logit_row_offsets = nullptr;  // [B + 1]
  const std::uint32_t* token_row_offsets = nullptr;  // [B + 1]
  const std::uint32_t* lp_output_offsets = nullptr;  // [B + 1]
  std::uint64_t batch_size = 0;                      // B
  std::uint64_t output_rows = 0;                     // N = lp_output_offsets[B], known to the caller
};

struct DeviceOutput {
  float* lp_logits = nullptr;         // [N, W]
  std::uint32_t* lp_tokens = nullptr;  // [N, W]
};

// Bytes of device workspace cuda_logprobs needs (at most about 64 MiB: larger batches run in
// groups of rows that reuse it). 256-byte aligned pointers are expected.
std::size_t cuda_workspace_bytes(std::uint64_t output_rows, std::uint64_t vocab, int levels);

// Queues the computation on `stream`. Returns cudaErrorInvalidValue for levels outside 0..16,
// a null workspace or one smaller than cuda_workspace_bytes, else the launch's error.
cudaError_t cuda_logprobs(const DeviceBatch& batch, int levels, const DeviceOutput& out, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream);

// cudaSuccess when this build's kernels can run on the current device; otherwise why not (for
// example cudaErrorNoKernelImageForDevice on a GPU older than the architectures built).
cudaError_t cuda_kernels_loadable();

}  // namespace logprobs
