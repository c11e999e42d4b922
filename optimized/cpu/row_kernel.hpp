// The SIMD pass over one chunk of a row: softmax statistics and top-K admission in one read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "candidate_buffer.hpp"

namespace logprobs::cpu {

// What a chunk contributes to its row's normalizer: sum = sum over the chunk of exp(x - ref).
// ref is a reference point, not the chunk's max: the kernel lets the max run up to kRefMargin
// above it before rescaling (see row_kernel.cpp), so the row's normalizer is
//   n = -(R + log(sum_c sum_c * exp(ref_c - R))),  R = max_c ref_c.
// ref is -inf for a chunk of only -inf, +inf for a chunk holding +inf (SPEC §3 reads both off R).
struct ChunkStats {
  float ref;
  double sum;
  bool has_nan;
};

// Scans x[0, n) (tokens first_token + j): returns the chunk's statistics and admits into `buffer`
// every entry above its threshold (see candidate_buffer.hpp). Dispatches to the best SIMD target
// Highway finds at run time (or the one a test forces with hwy::SetSupportedTargetsForTest).
ChunkStats scan_chunk(const float* x, std::uint64_t n, std::uint32_t first_token, CandidateBuffer& buffer);

// scan_chunk compiled for one SIMD target only, called without dispatch.
using ChunkScanner = ChunkStats (*)(const float* x, std::uint64_t n, std::uint32_t first_token,
                                   CandidateBuffer& buffer);
struct TargetKernel {
  std::int64_t target;  // a Highway target bit (HWY_AVX2, ...)
  ChunkScanner scan;
};
// Every target this binary holds the kernel for, best first: the x86 ones the compiler could
// build, and Highway's portable fallback.
std::span<const TargetKernel> compiled_kernels();

// The target scan_chunk dispatches to now, for reports and tests.
const char* scan_chunk_target();

// out[i] = exp(in[i]) as scan_chunk computes it under the current target (softmax_exp-inl.h);
// for the test of its error bound.
void exp_for_test(const float* in, float* out, std::size_t n);

}  // namespace logprobs::cpu
