// Sequential models of the CUDA kernels' steps, built from the same functions the kernels call
// (cuda_plan.hpp) and run on the CPU: a block's statistics, its radix select and emit, and
// whole rows through both kernels. For the tests beside this file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_plan.hpp"

namespace logprobs::cuda_model {

using namespace cuda_plan;

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct StdExp {
  float operator()(float x) const { return std::exp(x); }
};
struct StdLog {
  float operator()(float x) const { return std::log(x); }
};

inline PartialStats stats_of(const std::vector<float>& x, std::size_t begin, std::size_t end) {
  PartialStats s = empty_stats();
  for (std::size_t i = begin; i < end; ++i) {
    s.flags |= special_flags(x[i]);
    if (special_flags(x[i]) == 0 && x[i] > s.max) s.max = x[i];
  }
  if (s.max > -kInf)
    for (std::size_t i = begin; i < end; ++i)
      if (special_flags(x[i]) == 0 && x[i] > -kInf) s.sum += std::exp(x[i] - s.max);
  return s;
}

// The warp's digit pick as the kernel computes it: lane sums, an inclusive scan across lanes,
// the first lane to reach `remaining` walks its own 8 bins.
inline DigitPick warp_model_pick(const std::uint32_t* hist, std::uint32_t remaining, std::uint32_t* total) {
  std::uint32_t inclusive[kWarpSize];
  std::uint32_t sums[kWarpSize];
  std::uint32_t running = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    sums[lane] = 0;
    for (int i = 0; i < kBinsPerLane; ++i) sums[lane] += hist[lane_top_bin(lane) - i];
    running += sums[lane];
    inclusive[lane] = running;
  }
  *total = running;
  for (int lane = 0; lane < kWarpSize; ++lane)
    if (inclusive[lane] >= remaining)
      return pick_digit_in_group(hist, lane_top_bin(lane), kBinsPerLane, inclusive[lane] - sums[lane], remaining);
  return {-1, running, 0};
}

// The block's select, run sequentially over keys in the kernel's scan order.
inline SelectRule model_select(const std::vector<std::uint32_t>& keys, std::uint32_t k, int* passes = nullptr) {
  RadixState st = radix_begin(k);
  int count = 0;
  while (!st.done) {
    std::uint32_t hist[kRadixBins] = {};
    for (std::uint32_t key : keys)
      if (in_bucket(st, key)) ++hist[digit_of(st, key)];
    std::uint32_t total = 0;
    const DigitPick warp = warp_model_pick(hist, st.remaining, &total);
    if (total > st.remaining) {
      const DigitPick serial = pick_digit(hist, st.remaining);
      EXPECT_EQ(warp.digit, serial.digit);
      EXPECT_EQ(warp.above, serial.above);
      EXPECT_EQ(warp.bucket, serial.bucket);
    }
    st = radix_step(st, total, warp);
    ++count;
    EXPECT_LE(count, 4);
  }
  if (passes) *passes = count;
  return st.rule;
}

// Positions of the selected keys, as the kernel's scan assigns them; -1 when not selected.
inline std::vector<std::int64_t> model_emit(const std::vector<std::uint32_t>& keys, const SelectRule& rule) {
  std::vector<std::int64_t> pos(keys.size());
  std::uint64_t above = 0, ties = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    pos[i] = emit_position(rule, keys[i], above, ties);
    above += is_above(rule, keys[i]);
    ties += is_tie(rule, keys[i]);
  }
  return pos;
}

struct ModelRow {
  std::vector<float> values;
  std::vector<std::uint32_t> tokens;
};

// Items of one "block" in the kernel's scan order (thread-major), with their values and tokens.
struct Items {
  std::vector<float> values;
  std::vector<std::uint32_t> tokens;
};

// The thread maxima floor, then the select, then the emit, as chunk_pass and row_pass do.
inline std::vector<std::pair<float, std::uint32_t>> model_block_top_k(const Items& items, std::uint32_t k) {
  const int per_thread = int(items.values.size() / kThreads);
  std::vector<std::uint32_t> keys(items.values.size());
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = radix_key(items.values[i]);
  std::uint32_t floor = 1;
  if (k < std::uint32_t(kThreads)) {
    std::vector<std::uint32_t> maxima(kThreads, 0);
    for (int t = 0; t < kThreads; ++t)
      for (int i = 0; i < per_thread; ++i) maxima[t] = std::max(maxima[t], keys[std::size_t(t) * per_thread + i]);
    floor = candidate_floor(model_select(maxima, k));
  }
  for (auto& key : keys) key = filter_key(key, floor);
  const SelectRule rule = model_select(keys, k);
  const std::vector<std::int64_t> pos = model_emit(keys, rule);
  std::vector<std::pair<float, std::uint32_t>> out(rule.selected);
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (pos[i] >= 0) out[pos[i]] = {items.values[i], items.tokens[i]};
  return out;
}

inline ModelRow model_row(const float* x, std::uint64_t vocab, std::uint32_t token, int levels) {
  const LaunchPlan p = plan_launch(1, vocab, levels);
  std::vector<PartialStats> chunk_stats;
  std::vector<std::vector<std::pair<float, std::uint32_t>>> chunk_top;
  for (std::uint64_t c = 0; c < p.splits; ++c) {
    const std::uint64_t start = c * kChunkElems, len = std::min(kChunkElems, vocab - start);
    Items items;
    PartialStats block = empty_stats();
    for (int t = 0; t < kThreads; ++t) {
      std::vector<float> mine;
      for (int i = 0; i < kItemsPerThread; ++i) {
        const std::uint64_t off = quad_offset(i / 4, t) + i % 4;
        const float v = off < len ? x[start + off] : -kInf;
        mine.push_back(v);
        items.values.push_back(v);
        items.tokens.push_back(std::uint32_t(start + off));
      }
      block = combine_stats(block, stats_of(mine, 0, mine.size()), StdExp{});
    }
    chunk_stats.push_back(block);
    if (p.register_merge && p.k > 0) chunk_top.push_back(model_block_top_k(items, p.k));
  }
  PartialStats total = empty_stats();
  for (const PartialStats& s : chunk_stats) total = combine_stats(total, s, StdExp{});
  const float n = normalizer(total, StdLog{});

  std::vector<std::pair<float, std::uint32_t>> top;
  if (p.k > 0 && p.register_merge) {
    Items merged;  // item e = i * kThreads + t, scanned thread-major
    merged.values.assign(std::size_t(kThreads) * kItemsPerThread, -kInf);
    merged.tokens.assign(merged.values.size(), 0);
    for (std::uint64_t e = 0; e < p.splits * p.k; ++e) {
      const auto& chunk = chunk_top[e / p.k];
      if (e % p.k >= chunk.size()) continue;
      const std::size_t slot = (e % kThreads) * kItemsPerThread + e / kThreads;
      merged.values[slot] = chunk[e % p.k].first;
      merged.tokens[slot] = chunk[e % p.k].second;
    }
    top = model_block_top_k(merged, p.k);
  } else if (p.k > 0) {
    std::vector<std::uint32_t> keys(vocab);
    for (std::uint64_t j = 0; j < vocab; ++j) keys[j] = radix_key(x[j]);
    const SelectRule rule = model_select(keys, p.k);
    const std::vector<std::int64_t> pos = model_emit(keys, rule);
    top.resize(rule.selected);
    for (std::uint64_t j = 0; j < vocab; ++j)
      if (pos[j] >= 0) top[pos[j]] = {x[j], std::uint32_t(j)};
  }
  ModelRow row;
  for (const auto& [v, t] : top) {
    row.values.push_back(v + n);
    row.tokens.push_back(t);
  }
  while (row.tokens.size() < p.k) {
    row.values.push_back(-kInf + n);
    row.tokens.push_back(std::uint32_t(vocab));
  }
  row.values.push_back(x[token] + n);
  row.tokens.push_back(token);
  return row;
}

}  // namespace logprobs::cuda_model
