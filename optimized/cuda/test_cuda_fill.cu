// The large-index device test's fill (test_cuda_fill.hpp), on the device: 8 GiB in milliseconds.
#include <cuda_runtime_api.h>

#include "test_cuda_fill.hpp"

namespace logprobs::cuda_test {
namespace {

__global__ void fill(std::uint16_t* out, std::uint64_t count) {
  const std::uint64_t step = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step)
    out[i] = large_fill_bits(i);
}

}  // namespace

int fill_large_logits(std::uint16_t* device, std::uint64_t count) {
  fill<<<4096, 256>>>(device, count);
  return int(cudaDeviceSynchronize());
}

}  // namespace logprobs::cuda_test
