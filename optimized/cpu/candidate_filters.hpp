// The candidate buffer's steps that at large K touch every admitted entry: keeping the entries at
// or above a value (a compaction) or above it (its tie-break), copying those between two values
// (a selection's bracket), splitting them at a pivot (a round of quickselect), the radix keys of
// the entries, and keeping the keys of one digit (a round of radix selection); and the
// speculation's sample of a row. The filters keep order, and but for the bracket and the split
// work in place. SIMD, dispatched to the best Highway target at run time: a vector compress per
// 16 entries on AVX-512, where the scalar loop (a store and a dependent count per entry) took
// 4.6x as long (71.8k entries, Zen 4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace logprobs::cpu {

// Float -> unsigned key with the same order (for non-NaN values): flip all bits of negatives, set
// the sign bit of positives. -0.0 is mapped to +0.0's key, since the two compare equal as floats.
inline std::uint32_t order_key(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if (v == 0.0f) bits = 0;
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

inline float from_order_key(std::uint32_t key) {
  const std::uint32_t bits = (key & 0x80000000u) ? key & 0x7FFFFFFFu : ~key;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Copies the values i < n with least <= values[i] <= most to out, in order, and counts those
// above most into *above; returns how many it copied. out holds n values and one vector more,
// and does not overlap values. No value is NaN.
std::size_t keep_between(const float* values, std::size_t n, float least, float most, float* out,
                         std::size_t* above);

// Copies the values i < n above pivot to above and those below it to below, each in order;
// returns how many went to each ({above, below}: the rest equal pivot). above and below hold n
// values and one vector more, and overlap neither values nor each other. No value is NaN.
struct SplitCounts {
  std::size_t above, below;
};
SplitCounts split_at_pivot(const float* values, std::size_t n, float pivot, float* above, float* below);

// The top slots of a row x[0, n) cut at kth (CandidateBuffer::cut_of_row): the entries above kth
// and the first `ties` of those equal to it, in order, as slots (token i, value float(double(x[i])
// + normalizer): canonical::output_value at a finite normalizer). Writes at most `slots` of them
// and nothing past those; returns how many. No x is NaN.
std::size_t write_top_slots(const float* x, std::size_t n, float kth, std::size_t ties, double normalizer,
                            float* values, std::uint32_t* tokens, std::size_t slots);

// The speculation's sample (CandidateBuffer::speculative_threshold): of each of `lines` runs of
// `run` entries, x[line * stride, line * stride + run), copies the candidates (those neither -inf
// nor NaN) to out, in order, and writes their largest to line_max[line] (-inf where there is
// none); returns how many it copied. run is a multiple of 16; out holds lines * run values and
// one vector more, and is either x itself with stride == run (in place) or apart from it. Asks
// for the run 8 lines ahead: sampled lines lie out of the hardware prefetchers' reach.
std::size_t sample_lines(const float* x, std::size_t stride, std::size_t run, std::size_t lines, float* out,
                         float* line_max);

// keys[i] = order_key(values[i]) for i < n; no value is NaN.
void to_order_keys(const float* values, std::size_t n, std::uint32_t* keys);

// Moves the entries i < n with values[i] >= least (and their tokens) to the front, in order;
// returns how many. No value is NaN.
std::size_t keep_at_least(float* values, std::uint32_t* tokens, std::size_t n, float least);

// The same for the entries with values[i] > bound.
std::size_t keep_above(float* values, std::uint32_t* tokens, std::size_t n, float bound);

// The index of the count-th value equal to v, counting from the end: [that index, n) holds the
// last count of them (1 <= count <= how many of the n values equal v).
std::size_t last_ties_start(const float* values, std::size_t n, float v, std::size_t count);

// Moves the keys i < n with ((keys[i] >> shift) & mask) == digit to the front, in order; returns
// how many.
std::size_t keep_digit(std::uint32_t* keys, std::size_t n, int shift, std::uint32_t mask, std::uint32_t digit);

}  // namespace logprobs::cpu
