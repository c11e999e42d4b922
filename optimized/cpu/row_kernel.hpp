// The SIMD pass over one chunk of a row: SPEC §8's canonical statistics (the pairwise tree of its
// segments' partials, logprobs/canonical_arithmetic.hpp), the rank count and top-K admission.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "candidate_buffer.hpp"
#include "logprobs/canonical_arithmetic.hpp"
#include "row_source.hpp"

namespace logprobs::cpu {

// A chunk: canonical::kGroupSegments segments (16384 entries; the row's last chunk may be
// shorter), so that chunks reduce apart and then together (canonical_arithmetic.hpp).
inline constexpr std::uint64_t kChunk = canonical::kGroupSegments * canonical::kSegment;

struct ChunkInput {
  const RowSource* row = nullptr;
  std::uint64_t begin = 0;  // the chunk's first entry, a multiple of kChunk
  std::uint64_t n = 0;      // its entries, at most kChunk
  std::uint64_t vocab = 0;  // the row's (what may be prefetched)
  bool count_rank = false;  // count the entries with x_j >= x_s (SPEC §2.9)
  float xs = 0;
  // Where not empty, the scan only admits, from these segments of the row in ascending order
  // (segment s: entries [1024 s, 1024 s + 1024), cut at the row's end); begin and n are unused
  // and the ChunkScan returned is empty (admission by segment maxima, cpu_backend.cpp).
  std::span<const std::uint32_t> admit_segments;
};

// What a chunk contributes to its row: the pairwise tree of its segments' partials, the SPEC §3
// flags (canonical::kHasNaN, kHasPosInf), how many of its x_j are >= x_s, and each segment's
// largest x (NaN left out: -inf for a segment of only -inf and NaN).
struct ChunkScan {
  canonical::Partial partial;
  std::uint32_t flags = 0;
  std::uint64_t at_least_xs = 0;
  std::array<float, canonical::kGroupSegments> segment_max{};
};

// Scans a chunk: returns its statistics and admits into `buffer` every entry above the buffer's
// threshold (see candidate_buffer.hpp), in token order. Dispatches to the best SIMD target
// Highway finds at run time (or the one a test forces with hwy::SetSupportedTargetsForTest).
ChunkScan scan_chunk(const ChunkInput& in, CandidateBuffer& buffer);

// How an AVX-512 scan divides x by a temperature. Either gives each lane's IEEE quotient, so no
// output bit depends on the form, only the speed (tile_steps-inl.h, TileDivisor, says which is
// faster where): every vector by the divider, or half of them by the corrected reciprocal beside it.
enum class QuotientForm { divider, divider_and_reciprocal };
// The form the scans use: this CPU's faster one (fastest_quotient_form, by CPUID), unless a test
// set another.
QuotientForm quotient_form();
void set_quotient_form(QuotientForm form);
QuotientForm fastest_quotient_form();

// scan_chunk compiled for one SIMD target only, called without dispatch.
using ChunkScanner = ChunkScan (*)(const ChunkInput& in, CandidateBuffer& buffer);
struct TargetKernel {
  std::int64_t target;  // a Highway target bit (HWY_AVX2, ...)
  ChunkScanner scan;
};
// Every target this binary holds the kernel for, best first: the x86 ones the compiler could
// build, and Highway's portable fallback.
std::span<const TargetKernel> compiled_kernels();

// The target scan_chunk dispatches to now, for reports and tests.
const char* scan_chunk_target();

// For the tests, under the current target: out[i] = canonical::exp_f32(in[i]) as the kernel
// computes it; and canonical::combine of a[i] and b[i].
void exp_for_test(const float* in, float* out, std::size_t n);
void combine_for_test(const canonical::Partial* a, const canonical::Partial* b, canonical::Partial* out, std::size_t n);

}  // namespace logprobs::cpu
