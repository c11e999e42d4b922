// The candidate buffer's SIMD steps (candidate_filters.hpp) against scalar definitions (the
// filters, the bracket and the split against std::copy_if, the keys against order_key, the ties'
// search against a loop), under every Highway target this machine supports
// (hwy::TestWithParamTarget forces each in turn): every length up to a few vectors (each tail), in
// place, with ties at the bound and runs of all or nothing kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "candidate_filters.hpp"
#include "hwy/tests/hwy_gtest.h"

namespace logprobs::cpu {
namespace {

class CandidateFiltersPerTarget : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(CandidateFiltersPerTarget);

// Values from a few levels, so that many equal the bound; tokens distinct, to see the order.
struct Entries {
  std::vector<float> values;
  std::vector<std::uint32_t> tokens;
};

Entries random_entries(std::size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> level(-4, 4);
  Entries e;
  for (std::size_t i = 0; i < n; ++i) {
    e.values.push_back(0.5f * static_cast<float>(level(rng)));
    e.tokens.push_back(static_cast<std::uint32_t>(1000 + 7 * i));
  }
  return e;
}

// keep_at_least(bound), or keep_above(bound) when strict, against copy_if.
void expect_keeps_passing(Entries e, float bound, bool strict) {
  Entries expected;
  for (std::size_t i = 0; i < e.values.size(); ++i) {
    if (strict ? !(e.values[i] > bound) : e.values[i] < bound) continue;
    expected.values.push_back(e.values[i]);
    expected.tokens.push_back(e.tokens[i]);
  }
  const std::size_t kept = strict ? keep_above(e.values.data(), e.tokens.data(), e.values.size(), bound)
                                  : keep_at_least(e.values.data(), e.tokens.data(), e.values.size(), bound);
  ASSERT_EQ(kept, expected.values.size()) << "n " << e.values.size() << ", bound " << bound << ", strict " << strict;
  e.values.resize(kept);
  e.tokens.resize(kept);
  EXPECT_EQ(e.values, expected.values) << "n " << kept << ", strict " << strict;
  EXPECT_EQ(e.tokens, expected.tokens) << "n " << kept << ", strict " << strict;
}

TEST_P(CandidateFiltersPerTarget, KeepAtLeastAndAboveKeepTheEntriesPassingTheBoundInOrder) {
  std::mt19937 rng(25);
  for (std::size_t n = 0; n <= 100; ++n) {
    for (const float bound : {-3.0f, 0.0f, 0.25f, 2.0f, 9.0f}) {
      for (const bool strict : {false, true}) expect_keeps_passing(random_entries(n, rng), bound, strict);
    }
  }
  expect_keeps_passing(random_entries(70000, rng), 1.5f, false);
  expect_keeps_passing(random_entries(70000, rng), 1.5f, true);
}

TEST_P(CandidateFiltersPerTarget, KeepAtLeastAndAboveTellTiesAndTheInfinities) {
  for (std::size_t n = 0; n <= 40; ++n) {
    Entries e;
    for (std::size_t i = 0; i < n; ++i) {
      const float pattern[] = {1.0f, 1.0f, -1.0f, INFINITY, -INFINITY, 1.0f, 0.0f};
      e.values.push_back(pattern[i % 7]);
      e.tokens.push_back(static_cast<std::uint32_t>(i));
    }
    for (const bool strict : {false, true}) {
      expect_keeps_passing(e, 1.0f, strict);
      expect_keeps_passing(e, -INFINITY, strict);
      expect_keeps_passing(e, INFINITY, strict);
    }
  }
}

TEST_P(CandidateFiltersPerTarget, LastTiesStartFindsTheCountthTieFromTheEnd) {
  std::mt19937 rng(41);
  for (std::size_t n = 1; n <= 100; ++n) {
    const Entries e = random_entries(n, rng);
    for (const float v : {0.5f, -2.0f, 2.0f}) {
      std::size_t seen = 0;
      for (std::size_t i = n; i-- > 0;) {  // the scalar definition: each tie from the end in turn
        if (e.values[i] != v) continue;
        ++seen;
        EXPECT_EQ(last_ties_start(e.values.data(), n, v, seen), i) << "n " << n << ", v " << v << ", count " << seen;
      }
    }
  }
  const std::vector<float> zeros = {0.0f, -0.0f, 1.0f, 0.0f};  // -0 ties with +0
  EXPECT_EQ(last_ties_start(zeros.data(), zeros.size(), 0.0f, 3), 0u);
}

// keep_between(least, most) against copy_if, and its count of the values above most.
void expect_keeps_between(const std::vector<float>& values, float least, float most) {
  std::vector<float> expected;
  std::copy_if(values.begin(), values.end(), std::back_inserter(expected),
               [&](float v) { return v >= least && v <= most; });
  const auto above = std::size_t(std::count_if(values.begin(), values.end(), [&](float v) { return v > most; }));
  std::vector<float> out(values.size() + 16);
  std::size_t counted = 0;
  const std::size_t kept = keep_between(values.data(), values.size(), least, most, out.data(), &counted);
  ASSERT_EQ(kept, expected.size()) << "n " << values.size() << ", [" << least << ", " << most << "]";
  EXPECT_EQ(counted, above) << "n " << values.size() << ", [" << least << ", " << most << "]";
  out.resize(kept);
  EXPECT_EQ(out, expected) << "n " << values.size() << ", [" << least << ", " << most << "]";
}

TEST_P(CandidateFiltersPerTarget, KeepBetweenCopiesTheValuesInTheBracketAndCountsThoseAbove) {
  std::mt19937 rng(73);
  for (std::size_t n = 0; n <= 100; ++n) {
    const std::vector<float> values = random_entries(n, rng).values;
    for (const auto& [least, most] : {std::pair{-1.0f, 1.0f}, std::pair{0.5f, 0.5f}, std::pair{2.5f, 9.0f},
                                      std::pair{-INFINITY, INFINITY}, std::pair{3.0f, -3.0f}})
      expect_keeps_between(values, least, most);
  }
  expect_keeps_between(random_entries(70000, rng).values, -0.5f, 1.0f);
  const std::vector<float> edges = {INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, INFINITY, -1.0f, 0.0f, -INFINITY};
  expect_keeps_between(edges, -0.0f, 0.0f);  // -0 and +0 are both in it
  expect_keeps_between(edges, 1.0f, INFINITY);
  expect_keeps_between(edges, -INFINITY, -INFINITY);
}

// split_at_pivot against two copy_ifs.
void expect_splits(const std::vector<float>& values, float pivot) {
  std::vector<float> above, below;
  std::copy_if(values.begin(), values.end(), std::back_inserter(above), [&](float v) { return v > pivot; });
  std::copy_if(values.begin(), values.end(), std::back_inserter(below), [&](float v) { return v < pivot; });
  std::vector<float> out_above(values.size() + 16), out_below(values.size() + 16);
  const SplitCounts counts = split_at_pivot(values.data(), values.size(), pivot, out_above.data(), out_below.data());
  ASSERT_EQ(counts.above, above.size()) << "n " << values.size() << ", pivot " << pivot;
  ASSERT_EQ(counts.below, below.size()) << "n " << values.size() << ", pivot " << pivot;
  out_above.resize(counts.above);
  out_below.resize(counts.below);
  EXPECT_EQ(out_above, above) << "n " << values.size() << ", pivot " << pivot;
  EXPECT_EQ(out_below, below) << "n " << values.size() << ", pivot " << pivot;
}

TEST_P(CandidateFiltersPerTarget, SplitAtPivotCopiesTheValuesAboveAndBelowItInOrder) {
  std::mt19937 rng(79);
  for (std::size_t n = 0; n <= 100; ++n) {
    const std::vector<float> values = random_entries(n, rng).values;
    for (const float pivot : {0.0f, 0.5f, -2.0f, 2.0f, 9.0f, -9.0f}) expect_splits(values, pivot);
  }
  expect_splits(random_entries(70000, rng).values, 0.5f);
  const std::vector<float> edges = {INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, INFINITY, -1.0f, 0.0f, -INFINITY};
  expect_splits(edges, -0.0f);  // -0 and +0 are equal: neither side takes them
  expect_splits(edges, INFINITY);
  expect_splits(edges, -INFINITY);
}

// write_top_slots against a loop: the entries above kth and the first `ties` equal to it, as
// (token, float(double(x) + normalizer)), at most `slots` of them, nothing written past the slots
// (within them, past the count, it may write: whole vectors).
void expect_writes_top_slots(const std::vector<float>& x, float kth, std::size_t ties, std::size_t slots,
                             double normalizer = -11.123456789012345) {
  std::vector<float> values;
  std::vector<std::uint32_t> tokens;
  for (std::size_t i = 0, left = ties; i < x.size() && values.size() < slots; ++i) {
    const bool tie = x[i] == kth && left > 0;
    if (!(x[i] > kth || tie)) continue;
    left -= tie;
    values.push_back(float(double(x[i]) + normalizer));
    tokens.push_back(static_cast<std::uint32_t>(i));
  }
  constexpr float kUntouched = 12345.0f;
  std::vector<float> out_values(slots + 40, kUntouched);
  std::vector<std::uint32_t> out_tokens(slots + 40, 0xFFFFFFFFu);
  const std::size_t written =
      write_top_slots(x.data(), x.size(), kth, ties, normalizer, out_values.data(), out_tokens.data(), slots);
  const std::string where = "n " + std::to_string(x.size()) + ", kth " + std::to_string(kth) + ", ties " +
                            std::to_string(ties) + ", slots " + std::to_string(slots);
  ASSERT_EQ(written, values.size()) << where;
  for (std::size_t i = slots; i < out_values.size(); ++i) {
    ASSERT_EQ(out_values[i], kUntouched) << where << ": slot " << i << " written";
    ASSERT_EQ(out_tokens[i], 0xFFFFFFFFu) << where << ": slot " << i << " written";
  }
  out_values.resize(written);
  out_tokens.resize(written);
  EXPECT_EQ(out_tokens, tokens) << where;
  for (std::size_t i = 0; i < written; ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out_values[i]), std::bit_cast<std::uint32_t>(values[i])) << where;
}

TEST_P(CandidateFiltersPerTarget, WriteTopSlotsWritesTheCutInOrderAndNoMore) {
  std::mt19937 rng(83);
  for (std::size_t n = 0; n <= 100; ++n) {
    const std::vector<float> x = random_entries(n, rng).values;
    for (const float kth : {-2.0f, 0.0f, 0.25f, 2.0f}) {
      const std::size_t tied = std::size_t(std::count(x.begin(), x.end(), kth));
      for (const std::size_t ties : {std::size_t{0}, tied / 3, tied}) {
        const std::size_t passing =
            ties + std::size_t(std::count_if(x.begin(), x.end(), [&](float v) { return v > kth; }));
        // Room for all, the exact count (the caller's case), and less (the last vector cut short).
        for (const std::size_t slots : {passing + 20, passing, passing / 2})
          expect_writes_top_slots(x, kth, ties, slots);
      }
    }
  }
  // Values whose sums with the normalizer round differently in f32 and in double.
  std::vector<float> fine(5000);
  for (std::size_t i = 0; i < fine.size(); ++i) fine[i] = std::ldexp(1.0f + float(i) * 0x1p-20f, int(i % 40) - 20);
  expect_writes_top_slots(fine, 0.01f, 0, 5000);
  // Sums beyond f32's range, which round to -inf (a row spanning it: n near -FLT_MAX).
  std::vector<float> wide(100);
  for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = i % 3 == 0 ? -3.0e38f : i % 3 == 1 ? -1.0e38f : 1.0f;
  expect_writes_top_slots(wide, -INFINITY, 0, 100, -3.2e38);
  const std::vector<float> large = random_entries(70000, rng).values;
  expect_writes_top_slots(large, 0.5f, std::size_t(std::count(large.begin(), large.end(), 0.5f)) / 2, 35000);
  // Sorted rows, with runs of 7 ties: an ascending row's top is its last entries (the vectors
  // before them are skipped), a descending row's its first (the pass stops once the slots are full).
  const std::vector<float> ascending = [] {
    std::vector<float> row(1000);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = float(i / 7);
    return row;
  }();
  const std::vector<float> descending(ascending.rbegin(), ascending.rend());
  for (const std::vector<float>* row : {&ascending, &descending}) {
    for (const float kth : {0.0f, 50.0f, 71.0f, 142.0f}) {
      const std::size_t tied = std::size_t(std::count(row->begin(), row->end(), kth));
      const std::size_t above = std::size_t(std::count_if(row->begin(), row->end(), [&](float v) { return v > kth; }));
      for (const std::size_t ties : {std::size_t{0}, std::min<std::size_t>(3, tied), tied})
        for (const std::size_t slots : {above + ties, above + ties + 20})
          expect_writes_top_slots(*row, kth, ties, slots);
    }
  }
}

// sample_lines against a loop over the lines: each line's candidates (neither -inf nor NaN) in
// order, and its largest one (-inf where it has none), bits compared (so -0 and +0 differ). Lines
// a stride apart in a row, and in place (stride == run, out == x), as the speculation reads them.
void expect_samples_lines(const std::vector<float>& x, std::size_t stride, std::size_t run, std::size_t lines) {
  const std::string where =
      "stride " + std::to_string(stride) + ", run " + std::to_string(run) + ", lines " + std::to_string(lines);
  std::vector<float> expected, expected_max;
  for (std::size_t line = 0; line < lines; ++line) {
    float max = -INFINITY;
    for (std::size_t e = 0; e < run; ++e) {
      const float v = x[line * stride + e];
      if (!(v > -INFINITY)) continue;
      expected.push_back(v);
      max = std::max(max, v);
    }
    expected_max.push_back(max);
  }
  std::vector<float> in_place = x;
  std::vector<float> out(lines * run + 16), line_max(lines, 7.0f);
  const bool apart = stride != run;
  float* const into = apart ? out.data() : in_place.data();
  const std::size_t kept = sample_lines(apart ? x.data() : in_place.data(), stride, run, lines, into, line_max.data());
  ASSERT_EQ(kept, expected.size()) << where;
  for (std::size_t i = 0; i < kept; ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(into[i]), std::bit_cast<std::uint32_t>(expected[i])) << where << ", i " << i;
  for (std::size_t line = 0; line < lines; ++line) {
    // A line's maximum may be either zero where both are its largest: the lanes' order decides.
    if (expected_max[line] == 0.0f) {
      EXPECT_EQ(line_max[line], 0.0f) << where << ", line " << line;
      continue;
    }
    EXPECT_EQ(std::bit_cast<std::uint32_t>(line_max[line]), std::bit_cast<std::uint32_t>(expected_max[line]))
        << where << ", line " << line;
  }
}

TEST_P(CandidateFiltersPerTarget, SampleLinesCopiesEachLinesCandidatesAndItsMaximum) {
  std::mt19937 rng(97);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> kind(0, 9);
  std::vector<float> x(40 * 1024 + 32);
  for (float& v : x) {
    const int k = kind(rng);  // mostly values, some -inf, NaN, +inf and signed zeros
    v = k == 0                         ? -INFINITY
        : k == 1                       ? NAN
        : k == 2                       ? -0.0f
        : k == 3                       ? 0.0f
        : k == 4 && normal(rng) > 4.0f ? INFINITY
                                       : normal(rng);
  }
  for (std::size_t lines = 0; lines <= 40; ++lines) {
    expect_samples_lines(x, 1024, 16, lines);
    expect_samples_lines(x, 16, 16, lines);
    expect_samples_lines(x, 1000, 32, lines);
  }
  const std::vector<float> empty(20 * 16, -INFINITY), nans(20 * 16, NAN);
  expect_samples_lines(empty, 16, 16, 20);
  expect_samples_lines(nans, 16, 16, 20);
}

void expect_keeps_digit(std::vector<std::uint32_t> keys, int shift, std::uint32_t mask, std::uint32_t digit) {
  std::vector<std::uint32_t> expected;
  std::copy_if(keys.begin(), keys.end(), std::back_inserter(expected),
               [&](std::uint32_t key) { return ((key >> shift) & mask) == digit; });
  const std::size_t kept = keep_digit(keys.data(), keys.size(), shift, mask, digit);
  ASSERT_EQ(kept, expected.size()) << "n " << keys.size() << ", shift " << shift << ", digit " << digit;
  keys.resize(kept);
  EXPECT_EQ(keys, expected) << "shift " << shift << ", digit " << digit;
}

TEST_P(CandidateFiltersPerTarget, KeepDigitKeepsTheKeysOfThatDigitInOrder) {
  std::mt19937 rng(255);
  // Keys that differ in few bits of each digit, so that a digit matches often, not one in 2048.
  std::uniform_int_distribution<std::uint32_t> low(0, 3);
  for (std::size_t n = 0; n <= 100; ++n) {
    std::vector<std::uint32_t> keys;
    for (std::size_t i = 0; i < n; ++i) keys.push_back(low(rng) << 21 | low(rng) << 10 | low(rng) | 0x80000000u);
    expect_keeps_digit(keys, 21, 0x7FF, 0x400 | 2);
    expect_keeps_digit(keys, 10, 0x7FF, 1);
    expect_keeps_digit(keys, 0, 0x3FF, 3);
    expect_keeps_digit(keys, 0, 0x3FF, 0x3FF);  // none
  }
  std::vector<std::uint32_t> many(70000);
  for (auto& key : many) key = rng();
  expect_keeps_digit(many, 21, 0x7FF, many[123] >> 21);
}

// Every class of float but NaN: zeros of both signs, subnormals, normals, the largest, infinities.
std::vector<float> every_kind_of_float(std::size_t n, std::mt19937& rng) {
  const float edges[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, -1e-38f, 1.0f, -1.0f, 3.4e38f, -3.4e38f,
                         INFINITY, -INFINITY};
  std::vector<float> values;
  for (std::size_t i = 0; i < n; ++i) {
    float v = edges[i % std::size(edges)];
    if (i % 3 == 2) {  // random bits, NaN excluded
      const std::uint32_t bits = rng();
      std::memcpy(&v, &bits, sizeof v);
      if (std::isnan(v)) v = -2.5f;
    }
    values.push_back(v);
  }
  return values;
}

TEST(OrderKey, OrdersAsTheFloatsDoAndInverts) {
  std::mt19937 rng(7);
  const std::vector<float> values = every_kind_of_float(3000, rng);
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const float a = values[i], b = values[i + 1];
    EXPECT_EQ(order_key(a) < order_key(b), a < b) << a << " " << b;
    EXPECT_EQ(order_key(a) == order_key(b), a == b) << a << " " << b;
    EXPECT_EQ(from_order_key(order_key(a)), a) << a;  // -0.0 comes back as +0.0, which == it
  }
  EXPECT_FALSE(std::signbit(from_order_key(order_key(-0.0f))));
}

TEST_P(CandidateFiltersPerTarget, ToOrderKeysGivesOrderKeyOfEachValue) {
  std::mt19937 rng(31);
  for (const std::size_t n : {0, 1, 5, 15, 16, 17, 31, 33, 64, 100, 4099}) {
    const std::vector<float> values = every_kind_of_float(n, rng);
    std::vector<std::uint32_t> keys(n, 0xDEADBEEF), expected;
    for (const float v : values) expected.push_back(order_key(v));
    to_order_keys(values.data(), n, keys.data());
    EXPECT_EQ(keys, expected) << "n " << n;
  }
}

}  // namespace
}  // namespace logprobs::cpu
