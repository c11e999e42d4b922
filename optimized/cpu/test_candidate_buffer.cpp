// The candidate buffer alone (candidate_buffer.hpp): compaction's exact top-K in token order, and
// the speculative threshold's guarantee on rows whose large entries form one run; and the scalar
// row reader (row_source.hpp) that feeds its cold paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "candidate_buffer.hpp"
#include "candidate_filters.hpp"
#include "row_source.hpp"

namespace logprobs {
namespace {

// `buffer` must hold exactly the K best of `values` (as tokens 0, 1, ...) under (value
// descending, token ascending), in token order, with its threshold at the K-th best value.
void expect_the_k_best(const std::vector<float>& values, std::uint32_t k, const cpu::CandidateBuffer& buffer,
                       const std::string& where) {
  const std::size_t n = values.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return values[a] > values[b]; });
  std::vector<std::uint32_t> best(order.begin(), order.begin() + k);
  std::sort(best.begin(), best.end());
  ASSERT_EQ(buffer.size(), k) << where;
  EXPECT_TRUE(std::equal(best.begin(), best.end(), buffer.tokens())) << where;
  for (std::size_t i = 0; i < k; ++i) EXPECT_EQ(buffer.values()[i], values[buffer.tokens()[i]]) << where;
  EXPECT_EQ(buffer.threshold(), values[order[k - 1]]) << where;
}

// Admits `values` to a buffer of K and compacts.
void expect_compaction_keeps_the_k_best(const std::vector<float>& values, std::uint32_t k, const std::string& where) {
  cpu::CandidateBuffer buffer;
  buffer.reset(k);
  for (std::size_t i = 0; i < values.size(); ++i) buffer.admit(values[i], std::uint32_t(i));
  buffer.compact();
  expect_the_k_best(values, k, buffer, where);
}

std::vector<float> values_of_shape(std::string_view shape, std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    values[i] = shape == "random"       ? normal(rng)
                : shape == "ties"       ? float(int(normal(rng)))
                : shape == "ascending"  ? float(i)
                : shape == "descending" ? -float(i)
                                        : 1.0f;
  }
  return values;
}

// Random values, heavy ties, sorted either way and all equal, at K where the selection takes
// each of its paths: quickselect (n < 4096; nth_element once 16 or fewer are left), and a sample's
// bracket finished by quickselect (K = 4095: about 1.1k in it; K = 65535: about 17k). Radix
// selection, where the bracket misses, is the next test's.
TEST(CpuCandidateBuffer, CompactionKeepsTheKBestInTokenOrder) {
  std::mt19937_64 rng(59);
  for (const std::uint32_t k : {1u, 3u, 255u, 1100u, 4095u, 65535u}) {
    for (const char* shape : {"random", "ties", "ascending", "descending", "equal"}) {
      // one past capacity: admit() compacts once
      const std::vector<float> values = values_of_shape(shape, 2 * std::size_t{k} + 65, rng);
      expect_compaction_keeps_the_k_best(values, k, std::string(shape) + " K " + std::to_string(k));
    }
  }
}

// A split row's merge (cpu_backend.cpp's split_rows): each part's survivors, its own K best,
// appended in part order to a buffer reset for the merge, which then compacts. From three parts
// on, append() compacts before a part that would not fit and keeps that part's entries at or
// below the threshold, which the next compaction must drop (descending rows: every later part).
TEST(CpuCandidateBuffer, AppendedPartsMergeToTheKBest) {
  std::mt19937_64 rng(67);
  for (const std::uint32_t k : {1u, 20u, 255u, 1023u}) {
    for (const std::size_t parts : {2u, 3u, 5u}) {
      for (const char* shape : {"random", "ties", "ascending", "descending", "equal"}) {
        const std::vector<float> values = values_of_shape(shape, parts * (2 * std::size_t{k} + 7), rng);
        cpu::CandidateBuffer part, merged;
        merged.reset(k);
        for (std::size_t p = 0; p < parts; ++p) {
          part.reset(k);
          for (std::size_t i = p * values.size() / parts; i < (p + 1) * values.size() / parts; ++i)
            part.admit(values[i], std::uint32_t(i));
          part.compact();
          merged.append(part.values(), part.tokens(), part.size());
        }
        merged.compact();
        expect_the_k_best(values, k, merged,
                          std::string(shape) + " K " + std::to_string(k) + ", " + std::to_string(parts) + " parts");
      }
    }
  }
}

// The sample's bracket can miss the K-th value, and selection must then fall back, not trust it:
// here every sampled entry (the bracket's sample is taken at a fixed stride) lies above the rest,
// or below it, so the bracket holds none of the K best but the sample's own, or all of them.
TEST(CpuCandidateBuffer, CompactionIsExactWhereTheSampleLies) {
  std::mt19937_64 rng(71);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const std::uint32_t k : {4095u, 65535u}) {
    for (const float sampled : {1000.0f, -1000.0f}) {
      const std::size_t n = 2 * std::size_t{k} + 65, sample = cpu::CandidateBuffer::kBracketSample;
      std::vector<float> values(n);
      for (float& v : values) v = normal(rng);
      for (std::size_t i = 0; i < sample; ++i) values[(2 * i + 1) * n / (2 * sample)] = sampled + 0.001f * float(i);
      expect_compaction_keeps_the_k_best(values, k,
                                         "sampled entries at " + std::to_string(sampled) + " K " + std::to_string(k));
    }
  }
}

// Radix selection tells apart values whose order keys differ in any one bit: the candidates come
// in pairs of keys that differ only in bit b, so a selection that drops or misreads that bit
// (a digit split that misses it) keeps both of the K-th's pair and returns either.
TEST(CpuCandidateBuffer, CompactionSeesEveryBitOfTheOrderKey) {
  std::mt19937_64 rng(61);
  const auto finite_nonzero = [](std::uint32_t key) {
    const float v = cpu::from_order_key(key);
    return std::isfinite(v) && v != 0.0f;
  };
  for (int b = 0; b < 32; ++b) {
    for (const std::uint32_t k : {1100u, 4095u}) {
      std::vector<float> values;
      while (values.size() < 2 * std::size_t{k} + 65) {
        const auto key = std::uint32_t(rng()), partner = key ^ (1u << b);
        if (!finite_nonzero(key) || !finite_nonzero(partner)) continue;
        values.push_back(cpu::from_order_key(key));
        values.push_back(cpu::from_order_key(partner));
      }
      std::shuffle(values.begin(), values.end(), rng);
      expect_compaction_keeps_the_k_best(values, k, "bit " + std::to_string(b) + " K " + std::to_string(k));
    }
  }
}

// Candidates whose order keys share all but the last radix digit (values within 1024 ulps):
// each pass counts only its own digit, whatever the pass before counted. The middle digits are
// the edge buckets of the passes' tables; the values are near 1 (order key 0xBF800000).
TEST(CpuCandidateBuffer, CompactionOfCandidatesThatShareAllButTheLastDigit) {
  std::mt19937_64 rng(67);
  for (const std::uint32_t middle : {0u, 1023u, 2047u}) {
    for (const std::uint32_t k : {1100u, 4095u}) {
      std::vector<float> values(2 * std::size_t{k} + 65);
      for (float& v : values) v = cpu::from_order_key(0xBF800000u | middle << 10 | std::uint32_t(rng() % 1024));
      expect_compaction_keeps_the_k_best(values, k,
                                         "middle digit " + std::to_string(middle) + " K " + std::to_string(k));
    }
  }
}

// cut_of_row's kth and ties against a stable sort: the entries above kth and the first `ties`
// equal to it are the K best under (value descending, token ascending).
void expect_row_cut_is_exact(const std::vector<float>& x, std::uint32_t k, const std::string& where) {
  const std::size_t n = x.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return x[a] > x[b]; });
  cpu::CandidateBuffer buffer;
  buffer.reset(0);
  cpu::CandidateBuffer::RowCut cut{};
  ASSERT_TRUE(buffer.cut_of_row(x.data(), n, k, &cut)) << where;
  EXPECT_EQ(cut.kth, x[order[k - 1]]) << where;
  std::vector<std::uint32_t> kept;
  for (std::size_t i = 0, ties = cut.ties; i < n; ++i) {
    const bool tie = x[i] == cut.kth && ties > 0;
    if (x[i] > cut.kth || tie) kept.push_back(std::uint32_t(i));
    ties -= tie;
  }
  std::vector<std::uint32_t> best(order.begin(), order.begin() + k);
  std::sort(best.begin(), best.end());
  EXPECT_EQ(kept, best) << where;
}

// Random, tied (bf16-like: the K-th value shared by hundreds), sorted and constant rows at K from
// V / 8 to V - 1, at V = 20000 (one bracket) and 65536 (a bracket within the bracket from K = V /
// 8: 5.6k in the first at K = V / 8, 8.4k at V / 2); and a row of fewer than K candidates, whose
// cut is every candidate (kth -inf, no ties).
TEST(CpuCandidateBuffer, RowCutHoldsExactlyTheKBest) {
  std::mt19937 rng(89);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const std::size_t n : {std::size_t{20000}, std::size_t{65536}}) {
    for (int shape = 0; shape < 4; ++shape) {
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        x[i] = shape == 0 ? v : shape == 1 ? std::round(v * 8.0f) / 8.0f : shape == 2 ? float(i) * 0.01f : 2.5f;
      }
      for (const std::size_t k : {n / 8, std::size_t{4095}, n / 2, std::size_t{16383}, n - n / 5, n - 1})
        expect_row_cut_is_exact(
            x, std::uint32_t(k),
            "V " + std::to_string(n) + ", shape " + std::to_string(shape) + ", K " + std::to_string(k));
    }
  }
  const std::size_t n = 20000;
  std::vector<float> masked(n, -INFINITY);
  for (std::size_t i = 0; i < n; i += 3) masked[i] = normal(rng);
  cpu::CandidateBuffer buffer;
  cpu::CandidateBuffer::RowCut cut{};
  ASSERT_TRUE(buffer.cut_of_row(masked.data(), n, 8000, &cut)) << "6667 candidates, K = 8000";
  EXPECT_EQ(cut.kth, -INFINITY);
  EXPECT_EQ(cut.ties, 0u);
  expect_row_cut_is_exact(masked, 6667, "6667 candidates, K = 6667");
  expect_row_cut_is_exact(masked, 6000, "6667 candidates, K = 6000");
}

// The bracket within the bracket can miss too, and the outer bracket must then serve. The row's
// strided sample (1024 entries at (2i + 1) V / 2048) is set to the quantiles of the rest's
// uniform values, so that the first bracket holds the K-th value: at V = 65536 and K = V / 2 its
// ends are the sample's order statistics of rank 446 and 578 from the top (Floyd and Rivest's 4
// sigma, and 2, either side of rank 512), about 8.4k entries. Then every entry of that bracket at
// its own sample's stride is moved to the bracket's top, so the inner sample lies about where the
// K-th value ranks among them, as the outer one does in CompactionIsExactWhereTheSampleLies.
TEST(CpuCandidateBuffer, RowCutIsExactWhereTheInnerSampleLies) {
  constexpr std::size_t n = 65536, sample = cpu::CandidateBuffer::kBracketSample;
  std::mt19937 rng(97);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = uniform(rng);
  std::vector<bool> sampled(n, false);
  for (std::size_t i = 0; i < sample; ++i) {
    const std::size_t at = (2 * i + 1) * n / (2 * sample);
    x[at] = (float(i) + 0.5f) / float(sample);
    sampled[at] = true;
  }
  const float most = (float(sample - 446) + 0.5f) / float(sample), least = (float(sample - 578) + 0.5f) / float(sample);
  std::vector<std::size_t> inside;
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] >= least && x[i] <= most) inside.push_back(i);
  ASSERT_GE(inside.size(), 4 * sample) << "the first bracket is bracketed again";
  std::size_t moved = 0;
  for (std::size_t j = 0; j < sample; ++j) {
    const std::size_t at = inside[(2 * j + 1) * inside.size() / (2 * sample)];
    if (sampled[at]) continue;  // the outer sample stays as it is
    x[at] = most - 1e-5f * float(j % 8);
    ++moved;
  }
  ASSERT_GE(moved, 900u) << "most of the inner sample lies at the bracket's top";
  expect_row_cut_is_exact(x, n / 2, "inner sample at the bracket's top, V 65536, K 32768");
}

// Where a row's entries >= t form one run of tokens (sorted rows, a single peak), the speculative
// threshold t never starves the row of K entries, so such rows are never scanned twice (the
// guard in speculative_threshold: a sorted row's sampled top is one cache line's). The hardest
// peak lies midway between two sampled lines: its run starts at one line's last entry.
TEST(CpuSpeculation, OneRunRowsAlwaysKeepKEntries) {
  using cpu::CandidateBuffer;
  for (const std::uint64_t vocab : {16384u, 32000u, 100003u, 128256u, 152064u}) {
    for (const std::uint32_t k : {255u, 1000u, 1024u, 2048u, 4095u, 4096u}) {
      const double midway = 10.0 * CandidateBuffer::kSampleStride +
                            (CandidateBuffer::kSampleStride + CandidateBuffer::kSampleRun - 1) / 2.0;
      const std::pair<const char*, std::function<double(double)>> shapes[] = {
          {"ascending", [](double j) { return j; }},
          {"descending", [](double j) { return -j; }},
          {"peak at V/3", [&](double j) { return -std::abs(j - double(vocab / 3)); }},
          {"peak midway between sampled lines", [&](double j) { return -std::abs(j - midway); }}};
      std::vector<float> row(vocab);
      for (const auto& [shape, rank] : shapes) {
        for (std::uint64_t j = 0; j < vocab; ++j) row[j] = static_cast<float>(0.001 * rank(double(j)));
        CandidateBuffer buffer;
        buffer.reset(k);
        const float threshold = buffer.speculative_threshold(cpu::RowSource(row.data()), vocab);
        const auto admitted = std::count_if(row.begin(), row.end(), [&](float x) { return x > threshold; });
        EXPECT_GE(admitted, k) << shape << " V " << vocab << " K " << k << " threshold " << threshold;
      }
    }
  }
}

// speculative_threshold against its definition (sample_plan): the float just below min(the l-th
// largest line maximum, the j-th largest sampled candidate), read by at(), or -inf where fewer
// than j candidates were sampled. A wrong threshold changes no output (the kernel rescans a row it
// starves, and a low one only admits more), so this is what says it is wrong. Random rows with
// holes (-inf, NaN), as f32, bf16 and f16 and with a temperature; rows whose lines each hold one
// large entry; constant rows (every entry tied); rows of few candidates, j of them sampled or
// j - 1.
TEST(CpuSpeculation, ThresholdIsTheSamplesRanks) {
  using cpu::CandidateBuffer;
  std::mt19937 rng(101);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> kind(0, 19);
  for (const std::uint64_t vocab : {32000u, 128256u, 262144u}) {
    std::vector<float> random(vocab), spiky(vocab), constant(vocab, 1.5f), sparse(vocab, -INFINITY);
    for (float& v : random) {
      const int k = kind(rng);
      v = k == 0 ? -INFINITY : k == 1 ? NAN : normal(rng);
    }
    // One entry of each line far above the rest: the j-th largest entry is the j-th line maximum.
    for (std::uint64_t i = 0; i < vocab; ++i) spiky[i] = i % 16 == 3 ? normal(rng) + 100.0f : normal(rng);
    for (std::uint64_t i = 0; i < vocab; i += 4099) sparse[i] = normal(rng);
    for (const std::uint32_t k : {255u, 1023u, 4095u, 8000u}) {
      CandidateBuffer buffer;
      buffer.reset(k);
      const CandidateBuffer::SamplePlan plan = CandidateBuffer::sample_plan(k, vocab);
      if (plan.lines == 0) {  // K near V (32000 / 8000): no speculation
        EXPECT_EQ(buffer.speculative_threshold(cpu::RowSource(random.data()), vocab), -INFINITY) << "K " << k;
        continue;
      }
      // Exactly j sampled candidates (the least of which is t), and one fewer (no speculation).
      std::vector<float> j_sampled(vocab, -INFINITY), fewer(vocab, -INFINITY);
      const std::uint64_t sampled = plan.lines * CandidateBuffer::kSampleRun;
      for (std::uint64_t t = 0; t < plan.j; ++t) {  // the (t * sampled / j)-th sampled entry
        const std::uint64_t s = t * (sampled / plan.j);
        const std::uint64_t at =
            s / CandidateBuffer::kSampleRun * CandidateBuffer::kSampleStride + s % CandidateBuffer::kSampleRun;
        j_sampled[at] = normal(rng);
        if (t > 0) fewer[at] = normal(rng);
      }
      for (const auto& [shape, x] :
           {std::pair{"random", &random}, std::pair{"spiky", &spiky}, std::pair{"constant", &constant},
            std::pair{"sparse", &sparse}, std::pair{"j sampled", &j_sampled}, std::pair{"j - 1 sampled", &fewer}}) {
        for (const LogitsDtype dtype : {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16}) {
          for (const std::optional<float> temperature : {std::optional<float>{}, std::optional<float>{0.7f}}) {
            // The 16-bit rows are the f32 row's bits read as half-words: other values, as random.
            cpu::RowSource row(x->data());
            row.dtype = dtype;
            row.temperature = temperature;
            std::vector<float> candidates, line_max;
            for (std::uint64_t line = 0; line < plan.lines; ++line) {
              float max = -INFINITY;
              for (std::uint64_t e = 0; e < CandidateBuffer::kSampleRun; ++e) {
                const float v = row.at(line * CandidateBuffer::kSampleStride + e);
                if (!(v > -INFINITY)) continue;
                candidates.push_back(v);
                max = std::max(max, v);
              }
              line_max.push_back(max);
            }
            float expected = -INFINITY;
            if (candidates.size() >= plan.j) {
              std::sort(candidates.begin(), candidates.end(), std::greater<float>());
              std::sort(line_max.begin(), line_max.end(), std::greater<float>());
              expected = std::nextafter(std::min(line_max[plan.l - 1], candidates[plan.j - 1]), -INFINITY);
            }
            EXPECT_EQ(buffer.speculative_threshold(row, vocab), expected)
                << shape << " " << dtype_name(dtype) << (temperature ? " with" : " without") << " a temperature, V "
                << vocab << " K " << k << " (j " << plan.j << ", l " << plan.l << ")";
          }
        }
      }
    }
  }
}

// RowSource::read (the speculation sample's loops per dtype) gives at()'s x bit for bit, for every
// entry of the range: f32, bf16 and f16 (every 16-bit pattern: subnormals, infinities, NaNs), with
// and without a temperature, from an offset into the row. Its output starts as a pattern no read
// gives, so an entry read wrong or left out shows. The speculation only moves a threshold that the
// kernel checks, so a wrong read here changes no output: this is what says it is wrong.
TEST(CpuRowSource, ReadGivesAtsValues) {
  // Half-word h holds h * 40503 mod 2^16 (40503 is odd: every 16-bit pattern once in the first
  // 65536), so the 16-bit dtypes meet every entry there is; an f32 entry is two such half-words.
  constexpr std::uint64_t kHalfWords = 2 * (65536 + 40), kBegin = 7;
  std::vector<std::uint16_t> row(kHalfWords);
  for (std::uint64_t h = 0; h < kHalfWords; ++h) row[h] = static_cast<std::uint16_t>(h * 40503u);
  // A NaN that no entry holds (its halves 0xDBAD, 0x7FBA are not 40503 apart) and no widening or
  // division gives (a signalling one).
  constexpr std::uint32_t kUnread = 0x7FBADBADu;
  for (const LogitsDtype dtype : {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16}) {
    for (const std::optional<float> temperature : {std::optional<float>{}, std::optional<float>{0.7f}}) {
      cpu::RowSource source(reinterpret_cast<const float*>(row.data()));
      source.dtype = dtype;
      source.temperature = temperature;
      const std::uint64_t n = kHalfWords * sizeof(std::uint16_t) / dtype_bytes(dtype) - kBegin;
      std::vector<float> out(n, std::bit_cast<float>(kUnread));
      source.read(kBegin, n, out.data());
      for (std::uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(source.at(kBegin + i)))
            << dtype_name(dtype) << (temperature ? " with" : " without") << " a temperature, entry " << kBegin + i;
      }
    }
  }
}

}  // namespace
}  // namespace logprobs
