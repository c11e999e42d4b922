// The inputs the benchmarks time: one ragged batch per shape, generated once and reused by every
// backend, level and thread count of that shape.
#pragma once

#include <cstdint>
#include <string_view>

#include "harness/batch_data.hpp"
#include "logprobs/batch.hpp"

namespace logprobs::bench {

enum class Distribution {
  normal,     // N(0, 2) per entry: the common case for top-K threshold filtering
  ascending,  // each row sorted ascending: every entry beats the running K-th best
  zipf,       // a language model's shape: 12 - 2.5 ln(rank) + N(0, 1.5), ranks a random permutation
};

std::string_view distribution_name(Distribution d);

struct Shape {
  std::uint64_t rows;
  std::uint64_t vocab;
  Distribution dist;
  LogitsDtype dtype = LogitsDtype::f32;
  bool temperatures = false;  // every batch item at T = 0.7 (SPEC §2.5)
  bool operator==(const Shape&) const = default;
};

// The batch of a shape: B = rows batch items of one logit row and one output row each (a decode
// step, no echo), sampled tokens drawn uniformly, logits drawn per `dist` with a fixed seed and
// rounded to `dtype` (a bf16 batch holds the bf16 rounding of the f32 one's values).
// Holds one shape at a time: benchmarks are registered grouped by shape, so each shape is
// generated once, and at most one full-size batch (256 x 262144 f32 = 256 MiB) is alive.
const BatchData& batch_for(const Shape& shape);

}  // namespace logprobs::bench
