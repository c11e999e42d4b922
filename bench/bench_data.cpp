#include "bench_data.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "harness/half_precision.hpp"

namespace logprobs::bench {

std::string_view distribution_name(Distribution d) {
  switch (d) {
    case Distribution::ascending:
      return "ascending";
    case Distribution::zipf:
      return "zipf";
    case Distribution::normal:
      break;
  }
  return "normal";
}

namespace {

BatchData generate(const Shape& shape) {
  BatchData data;
  data.rows = shape.rows;
  data.vocab = shape.vocab;
  data.row_stride = shape.vocab;
  data.logits.resize(shape.rows * shape.vocab);
  // One generator per row, seeded by the row index, so the data does not depend on the thread
  // count that generates it.
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(shape.rows); ++r) {
    std::mt19937_64 rng(0x5eed0000u + static_cast<std::uint64_t>(r));
    std::normal_distribution<float> normal(0.0f, 2.0f);
    float* row = data.row(static_cast<std::uint64_t>(r));
    if (shape.dist == Distribution::zipf) {
      // The prior of tests/python/real_client.py's language-model rows (a few tokens far above a
      // long log-rank tail, so the top-K threshold sits in a thin tail), without its masked tokens.
      std::vector<std::uint32_t> rank(shape.vocab);
      std::iota(rank.begin(), rank.end(), 1u);
      std::shuffle(rank.begin(), rank.end(), rng);
      std::normal_distribution<float> noise(0.0f, 1.5f);
      for (std::uint64_t j = 0; j < shape.vocab; ++j) row[j] = 12.0f - 2.5f * std::log(float(rank[j])) + noise(rng);
      continue;
    }
    for (std::uint64_t j = 0; j < shape.vocab; ++j) row[j] = normal(rng);
    if (shape.dist == Distribution::ascending) std::sort(row, row + shape.vocab);
  }

  std::mt19937_64 rng(0x70c3u);
  std::uniform_int_distribution<std::uint32_t> token(0, static_cast<std::uint32_t>(shape.vocab - 1));
  for (std::uint64_t b = 0; b <= shape.rows; ++b) {
    data.logit_row_offsets.push_back(static_cast<std::uint32_t>(b));
    data.lp_output_offsets.push_back(static_cast<std::uint32_t>(b));
    data.token_row_offsets.push_back(0);  // no echo: no tokens besides the sampled one
    if (b < shape.rows) data.sampled_tokens.push_back(token(rng));
  }
  if (shape.temperatures) data.temperatures = std::vector<float>(shape.rows, 0.7f);
  return with_dtype(data, shape.dtype);
}

}  // namespace

const BatchData& batch_for(const Shape& shape) {
  static std::unique_ptr<BatchData> cached;
  static Shape cached_shape{};
  if (!cached || !(cached_shape == shape)) {
    cached.reset();  // free the old batch before allocating the next
    cached = std::make_unique<BatchData>(generate(shape));
    cached_shape = shape;
  }
  return *cached;
}

}  // namespace logprobs::bench
