// The candidate buffer's two filters, which at large K touch every admitted entry: keeping the
// entries at or above a value (a compaction), and keeping the radix keys of one digit (a round
// of radix selection). Both keep order and work in place. SIMD, dispatched to the best Highway
// target at run time: a vector compress per 16 entries on AVX-512, where the scalar loop (a
// store and a dependent count per entry) took 4.6x as long (71.8k entries, Zen 4).
#pragma once

#include <cstddef>
#include <cstdint>

namespace logprobs::cpu {

// Moves the entries i < n with values[i] >= least (and their tokens) to the front, in order;
// returns how many. No value is NaN.
std::size_t keep_at_least(float* values, std::uint32_t* tokens, std::size_t n, float least);

// Moves the keys i < n with ((keys[i] >> shift) & mask) == digit to the front, in order; returns
// how many.
std::size_t keep_digit(std::uint32_t* keys, std::size_t n, int shift, std::uint32_t mask, std::uint32_t digit);

}  // namespace logprobs::cpu
