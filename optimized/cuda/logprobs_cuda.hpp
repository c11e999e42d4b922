// The CUDA backend's API for servers: every array already on the device, work queued on the
// caller's stream, nothing synchronized, nothing allocated.
//
//   DeviceBatch batch{...};                  // device pointers, the SPEC §1 layout (device_batch.hpp)
//   std::size_t bytes = cuda_workspace_bytes(batch.output_rows, batch.vocab, k);
//   void* workspace;  cudaMallocAsync(&workspace, bytes, stream);   // reusable across calls
//   cudaError_t err = cuda_logprobs(batch, k, out, workspace, bytes, stream);
//
// The batch must already be valid (SPEC §4): this path reads the offsets only on the device, so
// it cannot check them. Validate the host copies with logprobs::validate_batch first, as the
// registered backend `cuda` does before it copies anything. Outputs are [N, K + 1] row-major
// (lp_ranks [N] when given). Results are SPEC §8's canonical arithmetic, bit for bit the
// `canonical` and `cpu` backends' (and so deterministic and batch-invariant, SPEC §6): a row's
// bits depend on its logits, its token, its temperature, V and K, not on the stream, the other
// rows or the workspace size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "device_batch.hpp"

namespace logprobs {

// Bytes of device workspace cuda_logprobs needs: at most about 64 MiB, larger batches running in
// groups of rows that reuse it, but at least one row's worth (at large K about 8 bytes per logit
// of a row). Its content need not be initialized. 0 for no output rows or K above 65535.
std::size_t cuda_workspace_bytes(std::uint64_t output_rows, std::uint64_t vocab, std::uint32_t k);

// Queues the computation at top-K width k (0..65535) on `stream`. Returns cudaErrorInvalidValue
// for K above 65535, a null workspace or one smaller than cuda_workspace_bytes, else the launches'
// error.
cudaError_t cuda_logprobs(const DeviceBatch& batch, std::uint32_t k, const DeviceOutput& out, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream);

// cudaSuccess when this build's kernels can run on the current device; otherwise why not (for
// example cudaErrorNoKernelImageForDevice on a GPU older than the architectures built).
cudaError_t cuda_kernels_loadable();

}  // namespace logprobs
