// What the two kernel files share: every kernel's arguments (one group of output rows), and the
// threshold path's passes, which threshold_kernels.cu launches for logprobs_kernels.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "block_ops.cuh"
#include "cuda_plan.hpp"
#include "device_batch.hpp"

namespace logprobs::cuda_kernels {

using Args = GroupArgs;

// The threshold path after pass 1: pass 2, refine, tally and emit, queued on `stream`.
cudaError_t launch_threshold_passes(const Args& a, cudaStream_t stream);

// For cuda_kernels_loadable: the first error getting any threshold kernel's attributes.
cudaError_t threshold_kernels_loadable();

}  // namespace logprobs::cuda_kernels
