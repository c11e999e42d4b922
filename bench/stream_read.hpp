// The machine's read bandwidth, measured in the same binary as the backends: a plain streaming
// read (a sum of 32-bit words) over a buffer of the same size as a shape's logits, with the same
// thread count. Same size, so a shape that fits in cache is compared with the cache's bandwidth
// and one that does not with memory's.
#pragma once

#include <cstdint>

namespace logprobs::bench {

// Which loop measured a run's stream_read (logprobs-bench writes it to the JSON's context), so that
// bench/compare never divides by two different anchors. Runs without it were timed by the first
// loop ("sse2-one-accumulator"), which its own adds held below the caches' bandwidth.
inline constexpr const char* kStreamReadLoop = "simd-four-accumulators-aligned";

// The wrapping sum of words[0, n), read by `threads` OpenMP threads, one contiguous share each,
// with the widest SIMD target this CPU runs.
std::uint32_t sum_words(const std::uint32_t* words, std::uint64_t n, int threads);

// Reads `bytes` bytes of a buffer kept for that size (one size at a time) with `threads` OpenMP
// threads; returns a checksum so the reads cannot be optimized away.
std::uint32_t stream_read(std::uint64_t bytes, int threads);

// Records a bandwidth measured by the stream_read benchmark, for read_bandwidth().
void record_read_bandwidth(std::uint64_t bytes, int threads, double bytes_per_second);

// The bandwidth the stream_read benchmark measured for this size and thread count in this run;
// when it did not run (filtered out), measures it now (about 0.2 s) and remembers it.
double read_bandwidth(std::uint64_t bytes, int threads);

}  // namespace logprobs::bench
