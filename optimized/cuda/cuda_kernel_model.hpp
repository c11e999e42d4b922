// The CUDA kernels run on the host, in launch order, CTA by CTA: the same launch plan, workspace
// layout and per-thread functions (cuda_plan.hpp, segment_math.hpp, cuda_select.hpp) that the
// kernels call, with each CTA-wide step (a reduction, a histogram, a scan of ballots) done
// sequentially over the 128 threads' items instead of by shuffles and shared atomics. Every
// decision those steps feed (the digit pick, the selection rule, the output positions, the tree)
// is the shared code's. test_cuda_kernel_model.cpp holds the model to the canonical and cpu
// backends bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda_plan.hpp"
#include "device_batch.hpp"
#include "segment_math.hpp"

namespace logprobs::cuda_model {

using namespace cuda_plan;

// ---- CTA-wide steps, sequentially ------------------------------------------------------------

// A CTA's items in item order: item i is held by thread i % 128 in round i / 128.
struct Items {
  std::vector<float> v = std::vector<float>(kCtaItems);
  std::vector<std::uint32_t> token = std::vector<std::uint32_t>(kCtaItems);
  std::vector<std::uint32_t> keys() const {
    std::vector<std::uint32_t> k(kCtaItems);
    for (std::size_t i = 0; i < kCtaItems; ++i) k[i] = radix_key(v[i]);
    return k;
  }
};

// The digit pick as warp_pick computes it (lane l sums bins / 32 bins from the top, an inclusive
// scan, the first lane to reach `remaining` walks its share), held to the serial pick.
inline RadixState finish_histogram(RadixState st, const std::uint32_t* hist) {
  const int bins = digit_bins(st.digits, st.level), per = bins / 32;
  std::uint32_t running = 0;
  DigitPick warp{-1, 0, 0};
  bool picked = false;
  for (int lane = 0; lane < 32; ++lane) {
    const int top = bins - 1 - per * lane;
    std::uint32_t sum = 0;
    for (int i = 0; i < per; ++i) sum += hist[top - i];
    if (!picked && running + sum >= st.remaining) {
      warp = pick_digit_in_group(hist, top, per, running, st.remaining);
      picked = true;
    }
    running += sum;
  }
  if (running > st.remaining) {
    const DigitPick serial = pick_digit(hist, bins, st.remaining);
    EXPECT_EQ(warp.digit, serial.digit);
    EXPECT_EQ(warp.above, serial.above);
    EXPECT_EQ(warp.bucket, serial.bucket);
  }
  return radix_step(st, running, warp);
}

inline SelectRule radix_select(const std::vector<std::uint32_t>& keys, std::uint32_t k) {
  RadixState st = radix_begin(k, Digits::block);
  while (!st.done) {
    std::uint32_t hist[256] = {};
    for (const std::uint32_t key : keys)
      if (in_bucket(st, key)) ++hist[digit_of(st, key)];
    st = finish_histogram(st, hist);
  }
  return st.rule;
}

// block_select: the thread-maxima floor, then the select over the filtered keys.
inline SelectRule block_select(const std::vector<std::uint32_t>& keys, std::uint32_t k) {
  std::uint32_t floor = 1;
  if (k < std::uint32_t(kThreads)) {
    std::vector<std::uint32_t> maxima(kThreads, 0);
    for (int r = 0; r < kRounds; ++r)
      for (int t = 0; t < kThreads; ++t) maxima[t] = std::max(maxima[t], keys[item_of(r, t)]);
    floor = candidate_floor(radix_select(maxima, k));
  }
  std::vector<std::uint32_t> filtered(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) filtered[i] = filter_key(keys[i], floor);
  return on_unfiltered_keys(radix_select(filtered, k), floor);
}

// block_emit: write(i, position) for each selected item; returns above << 16 | ties.
template <typename Write>
std::uint32_t block_emit(const std::vector<std::uint32_t>& keys, const SelectRule& rule, std::uint64_t above_base,
                         std::uint64_t ties_base, Write write) {
  std::uint32_t above = 0, ties = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::int64_t pos = emit_position(rule, keys[i], above_base + above, ties_base + ties);
    if (pos >= 0) write(i, std::uint64_t(pos));
    above += is_above(rule, keys[i]) ? 1 : 0;
    ties += is_tie(rule, keys[i]) ? 1 : 0;
  }
  return (above << 16) | ties;
}

// segment_stats: every thread's share, combined; the terms; 16 lane sums; the lane tree.
inline SegStats segment_stats(const std::vector<std::vector<float>>& x, std::uint64_t n, float xs) {
  ThreadStats all = thread_stats_begin();
  for (int t = 0; t < kThreads; ++t) {
    ThreadStats mine = thread_stats_begin();
    for (int r = 0; r < kRounds; ++r) thread_stats_add(mine, x[t][r], item_of(r, t) < n, xs);
    all = {max_of(all.max, mine.max), all.flags | mine.flags, all.at_least_xs + mine.at_least_xs};
  }
  std::vector<float> e(kSegment);
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRounds; ++r) e[item_of(r, t)] = exp_term(x[t][r], all.max, item_of(r, t) < n);
  float lanes[canonical::kLanes];
  for (int l = 0; l < canonical::kLanes; ++l) lanes[l] = lane_sum(e.data(), l);
  return {all.max, canonical::lane_tree(lanes), all.flags, all.at_least_xs};
}

// root_stats: the pairwise tree over the row's segment partials, level by level.
inline RowStats root_stats(const SegStats* seg, std::uint64_t segments) {
  std::uint32_t flags = 0, rank = 0;
  std::vector<canonical::Partial> level(segments);
  for (std::uint64_t i = 0; i < segments; ++i) {
    flags |= seg[i].flags;
    rank += seg[i].at_least_xs;
    level[i] = partial_of(seg[i]);
  }
  while (level.size() > 1) {
    std::vector<canonical::Partial> next((level.size() + 1) / 2);
    for (std::uint64_t i = 0; i < next.size(); ++i)
      next[i] = tree_node([&](std::uint64_t j) { return level[j]; }, level.size(), i);
    level = next;
  }
  return {canonical::normalizer(level[0], flags), rank};
}

// ---- The kernels, CTA by CTA ---------------------------------------------------------------------

class KernelModel {
 public:
  // Runs cuda_logprobs's launches for `batch` (host pointers) into `out` on the given path.
  static void run(const DeviceBatch& batch, std::uint32_t k, const DeviceOutput& out, Path path) {
    const LaunchPlan p = plan_launch_with(batch.output_rows, batch.vocab, k, path);
    std::vector<std::uint64_t> memory(p.workspace_bytes / 8 + 1);
    const Workspace ws = workspace_at(memory.data(), layout_for(p, p.rows_per_group));
    for (std::uint64_t g = 0; g < p.groups; ++g) {
      const std::uint64_t row_begin = g * p.rows_per_group;
      KernelModel m({batch, out, p, ws, row_begin, std::min(p.rows_per_group, batch.output_rows - row_begin)});
      m.prepare_rows();
      m.first_pass();
      if (p.path == Path::threshold) {
        m.second_pass();
        m.refine_pass();
        m.tally_pass();
        m.emit_pass();
      }
    }
  }

 private:
  // p_ names the plan inside a_, the copy this object owns (not the argument, often a temporary).
  explicit KernelModel(const GroupArgs& a) : a_(a), p_(a_.plan) {}

  std::uint64_t ctas() const { return first_pass_ctas(p_, a_.rows); }
  // arrive_last: the CTAs run in blockIdx order here, so the last to arrive is the last in order.
  bool arrive_last(std::uint32_t* counter, std::uint64_t expected) const { return ++*counter == expected; }

  void prepare_rows() {
    for (std::uint64_t local = 0; local < a_.rows; ++local) {
      a_.ws.rows[local] = row_info_of(a_, local);
      std::memset(row_counter(a_.ws, p_, local, 0), 0, p_.zeroed_words_per_row * 4);
    }
  }

  // The segment's entries as the CTA's threads hold them, and as items.
  std::uint64_t load(std::uint64_t local, std::uint64_t segment, std::vector<std::vector<float>>& x, Items& items) {
    x.assign(kThreads, std::vector<float>(kRounds));
    std::uint64_t n = 0;
    for (int t = 0; t < kThreads; ++t) {
      float mine[kRounds];
      n = load_segment(a_, a_.ws.rows[local], segment, t, mine);
      for (int r = 0; r < kRounds; ++r) {
        x[t][r] = items.v[item_of(r, t)] = mine[r];
        items.token[item_of(r, t)] = std::uint32_t(segment * kSegment + item_of(r, t));
      }
    }
    return n;
  }

  void first_pass() {
    for (std::uint64_t w = 0; w < ctas(); ++w) {
      const std::uint64_t local = w / p_.segments, segment = w % p_.segments;
      std::vector<std::vector<float>> x;
      Items items;
      const std::uint64_t n = load(local, segment, x, items);
      a_.ws.seg[row_segment(p_, local, segment)] = segment_stats(x, n, a_.ws.rows[local].xs);
      if (p_.path == Path::merge_tree) {
        merge_up(local, segment, items);
        continue;
      }
      std::uint32_t* row_hist = row_histogram(a_.ws, p_, local, 0);
      const RadixState st0 = radix_begin(p_.k, Digits::row);
      if (p_.path == Path::threshold)
        for (const std::uint32_t key : items.keys())
          if (in_bucket(st0, key)) ++row_hist[digit_of(st0, key)];
      if (!arrive_last(row_counter(a_.ws, p_, local, 0), p_.segments)) continue;
      const RowStats row = root_stats(a_.ws.seg + row_segment(p_, local, 0), p_.segments);
      std::uint32_t selected = 0;
      if (p_.path == Path::threshold) {
        const RadixState st = finish_histogram(st0, row_hist);
        std::uint32_t total = 0;
        for (int b = 0; b < kRowBins; ++b) total += row_hist[b];
        selected = std::min(total, p_.k);
        a_.ws.select[local] = RowSelect{row.normalizer, st};
      }
      write_row_tail(a_, local, row, selected, 0, 1);
    }
  }

  void merge_up(std::uint64_t local, std::uint64_t segment, Items items) {
    int level = 0;
    std::uint64_t node = segment;
    for (;;) {
      const std::vector<std::uint32_t> keys = items.keys();
      const SelectRule rule = block_select(keys, p_.k);
      if (level == p_.tree.depth) {
        const RowStats row = root_stats(a_.ws.seg + row_segment(p_, local, 0), p_.segments);
        const std::uint64_t o = a_.row_begin + local, width = std::uint64_t(p_.k) + 1;
        block_emit(keys, rule, 0, 0, [&](std::size_t i, std::uint64_t pos) {
          a_.out.lp_logits[o * width + pos] = canonical::output_value(items.v[i], row.normalizer);
          a_.out.lp_tokens[o * width + pos] = items.token[i];
        });
        write_row_tail(a_, local, row, rule.selected, 0, 1);
        return;
      }
      Candidate* list = node_list(a_.ws, p_, local, level, node);
      block_emit(keys, rule, 0, 0, [&](std::size_t i, std::uint64_t pos) { list[pos] = {items.v[i], items.token[i]}; });
      *node_count(a_.ws, p_, local, level, node) = rule.selected;
      node /= p_.tree.fan_in;
      ++level;
      if (!arrive_last(node_counter(a_.ws, p_, local, level, node), children_of(p_.tree, level, node))) return;
      for (std::uint64_t i = 0; i < kCtaItems; ++i) {
        const Candidate c = merge_candidate(a_, local, level, node, i);
        items.v[i] = c.value;
        items.token[i] = c.token;
      }
    }
  }

  Items slice(std::uint64_t s, std::uint32_t count) const {
    Items items;
    for (std::uint64_t i = 0; i < kCtaItems; ++i) {
      const Candidate c = slice_candidate(a_, s, i, count);
      items.v[i] = c.value;
      items.token[i] = c.token;
    }
    return items;
  }

  // count_digit, then pick_next in the last CTA of the row.
  void count_and_pick(std::uint64_t local, const RadixState& st, const std::vector<std::uint32_t>& keys, int counter) {
    std::uint32_t* row_hist = row_histogram(a_.ws, p_, local, st.level);
    if (!st.done)
      for (const std::uint32_t key : keys)
        if (in_bucket(st, key)) ++row_hist[digit_of(st, key)];
    if (arrive_last(row_counter(a_.ws, p_, local, counter), p_.segments) && !st.done)
      a_.ws.select[local].state = finish_histogram(st, row_hist);
  }

  void second_pass() {
    for (std::uint64_t w = 0; w < ctas(); ++w) {
      const std::uint64_t local = w / p_.segments, segment = w % p_.segments, s = row_segment(p_, local, segment);
      const RadixState st = a_.ws.select[local].state;
      std::vector<std::vector<float>> x;
      Items items;
      load(local, segment, x, items);
      const std::vector<std::uint32_t> keys = items.keys();
      Candidate* out = a_.ws.slices + s * kSegment;
      a_.ws.slice_counts[s] = block_emit(keys, kept_rule(st), 0, 0,
                                         [&](std::size_t i, std::uint64_t pos) {
                                           out[pos] = {items.v[i], items.token[i]};
                                         }) >>
                              16;
      count_and_pick(local, st, keys, 1);
    }
  }

  void refine_pass() {
    for (std::uint64_t w = 0; w < ctas(); ++w) {
      const std::uint64_t local = w / p_.segments, s = row_segment(p_, local, w % p_.segments);
      const RadixState st = a_.ws.select[local].state;
      if (!st.done) count_and_pick(local, st, slice(s, a_.ws.slice_counts[s]).keys(), 2);
    }
  }

  void tally_pass() {
    for (std::uint64_t w = 0; w < ctas(); ++w) {
      const std::uint64_t local = w / p_.segments, s = row_segment(p_, local, w % p_.segments);
      const SelectRule rule = a_.ws.select[local].state.rule;
      EXPECT_TRUE(a_.ws.select[local].state.done);
      const std::uint32_t counts =
          block_emit(slice(s, a_.ws.slice_counts[s]).keys(), rule, 0, 0, [](std::size_t, std::uint64_t) {});
      a_.ws.tallies[s] = {counts >> 16, counts & 0xFFFFu};
      if (!arrive_last(row_counter(a_.ws, p_, local, 3), p_.segments)) continue;
      Tally before{0, 0};
      for (std::uint64_t i = row_segment(p_, local, 0); i < row_segment(p_, local + 1, 0); ++i) {
        a_.ws.bases[i] = before;
        before = {before.above + a_.ws.tallies[i].above, before.ties + a_.ws.tallies[i].ties};
      }
    }
  }

  void emit_pass() {
    for (std::uint64_t w = 0; w < ctas(); ++w) {
      const std::uint64_t local = w / p_.segments, s = row_segment(p_, local, w % p_.segments);
      if (a_.ws.slice_counts[s] == 0) continue;
      const RowSelect row = a_.ws.select[local];
      const Items items = slice(s, a_.ws.slice_counts[s]);
      const std::uint64_t o = a_.row_begin + local, width = std::uint64_t(p_.k) + 1;
      block_emit(items.keys(), row.state.rule, a_.ws.bases[s].above, a_.ws.bases[s].ties,
                 [&](std::size_t i, std::uint64_t pos) {
                   a_.out.lp_logits[o * width + pos] = canonical::output_value(items.v[i], row.normalizer);
                   a_.out.lp_tokens[o * width + pos] = items.token[i];
                 });
    }
  }

  GroupArgs a_;
  const LaunchPlan& p_;
};

}  // namespace logprobs::cuda_model
