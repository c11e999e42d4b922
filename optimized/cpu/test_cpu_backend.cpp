// The `cpu` backend against the input and the reference (SPEC §5), under every Highway target
// this machine supports (hwy::TestWithParamTarget forces each in turn; the backend dispatches
// through HWY_DYNAMIC_DISPATCH, so it follows), plus determinism across thread counts and batch
// invariance (SPEC §6).
// Over 400 lines: one per-target suite, whose tests share its batch builders and judges.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "candidate_buffer.hpp"
#include "harness/half_precision.hpp"
#include "harness/judge.hpp"
#include "hwy/tests/hwy_gtest.h"
#include "logprobs/canonical_arithmetic.hpp"
#include "row_kernel.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

enum class RowKind { Normal, Bf16Ties, Ascending, Descending, Constant, Masked, OneNaN, PlusInf, OnlyNegInf };
constexpr RowKind kAllKinds[] = {RowKind::Normal,     RowKind::Bf16Ties, RowKind::Ascending,
                                 RowKind::Descending, RowKind::Constant, RowKind::Masked,
                                 RowKind::OneNaN,     RowKind::PlusInf,  RowKind::OnlyNegInf};

float to_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits &= 0xFFFF0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

void fill_row(float* x, std::uint64_t vocab, RowKind kind, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::uniform_int_distribution<std::uint64_t> pick(0, vocab - 1);
  const float offset = std::uniform_real_distribution<float>(-30.0f, 30.0f)(rng);
  for (std::uint64_t j = 0; j < vocab; ++j) {
    switch (kind) {
      case RowKind::Normal:
        x[j] = offset + normal(rng);
        break;
      case RowKind::Bf16Ties:
        x[j] = to_bf16(normal(rng));
        break;
      case RowKind::Ascending:
        x[j] = offset + 0.001f * float(j);
        break;
      case RowKind::Descending:
        x[j] = offset - 0.001f * float(j);
        break;
      case RowKind::Constant:
        x[j] = offset;
        break;
      case RowKind::Masked:
        x[j] = rng() % 4 == 0 ? offset + normal(rng) : -kInf;
        break;
      case RowKind::OneNaN:
        x[j] = normal(rng);
        break;
      case RowKind::PlusInf:
        x[j] = normal(rng);
        break;
      case RowKind::OnlyNegInf:
        x[j] = -kInf;
        break;
    }
  }
  if (kind == RowKind::OneNaN) x[pick(rng)] = kNaN;
  if (kind == RowKind::PlusInf) x[pick(rng)] = kInf, x[pick(rng)] = kInf;
}

// A ragged batch: each batch item owns 1..3 logit rows, all evaluated, of random kinds.
BatchData make_batch(std::uint64_t items, std::uint64_t vocab, std::mt19937_64& rng,
                     std::function<RowKind(std::mt19937_64&)> kind_of) {
  BatchData b;
  b.vocab = vocab;
  b.row_stride = vocab + rng() % 3;  // row_stride > V sometimes
  b.logit_row_offsets = {0};
  b.token_row_offsets = {0};
  b.lp_output_offsets = {0};
  std::uniform_int_distribution<std::uint32_t> token(0, std::uint32_t(vocab - 1));
  for (std::uint64_t i = 0; i < items; ++i) {
    const std::uint32_t rows = 1 + rng() % 3;
    b.logit_row_offsets.push_back(b.logit_row_offsets.back() + rows);
    b.lp_output_offsets.push_back(b.lp_output_offsets.back() + rows);
    for (std::uint32_t t = 0; t + 1 < rows; ++t) b.tokens.push_back(token(rng));
    b.token_row_offsets.push_back(std::uint32_t(b.tokens.size()));
    b.sampled_tokens.push_back(token(rng));
  }
  b.rows = b.logit_row_offsets.back();
  b.logits.assign(b.rows * b.row_stride, 0.0f);
  for (std::uint64_t r = 0; r < b.rows; ++r) fill_row(b.row(r), vocab, kind_of(rng), rng);
  return b;
}

BatchData batch_of_one_kind(std::uint64_t items, std::uint64_t vocab, std::mt19937_64& rng, RowKind kind) {
  return make_batch(items, vocab, rng, [kind](std::mt19937_64&) { return kind; });
}

BatchData batch_of_mixed_kinds(std::uint64_t items, std::uint64_t vocab, std::mt19937_64& rng) {
  return make_batch(items, vocab, rng, [](std::mt19937_64& g) { return kAllKinds[g() % std::size(kAllKinds)]; });
}

const Backend& cpu_backend() { return *find_backend("cpu"); }

// SPEC §5, judged by the harness's comparator at its default tolerance, at K = 2^levels - 1.
// Returns the first violation, or an empty string.
std::string agree_with_reference(const Backend& backend, const BatchData& batch, int levels, ErrorStats& errors) {
  const std::uint32_t k = top_k(levels);
  const Verdict verdict = judge_against_reference(batch, k, run_backend(backend, batch, k));
  errors.merge(verdict.stats);
  return verdict.ok() ? std::string() : verdict.violations.front().message();
}

std::string agree_with_reference(const BatchData& batch, int levels, ErrorStats& errors) {
  return agree_with_reference(cpu_backend(), batch, levels, errors);
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Restores the OpenMP thread count a test changed.
struct ThreadCount {
  int saved = omp_get_max_threads();
  ~ThreadCount() { omp_set_num_threads(saved); }
};

class CpuBackendPerTarget : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(CpuBackendPerTarget);

TEST_P(CpuBackendPerTarget, DispatchesToTheForcedTarget) {
  EXPECT_STREQ(cpu::scan_chunk_target(), hwy::TargetName(GetParam()));
}

// SPEC §8: the kernel's exp is the canonical one, bit for bit, on every target (the scalar
// definition's accuracy is tested in tests/test_canonical_arithmetic.cpp).
TEST_P(CpuBackendPerTarget, ExpGivesTheCanonicalBits) {
  std::vector<float> in = {0.0f,  -0.0f,  canonical::kExpFloor, std::nextafter(canonical::kExpFloor, -kInf),
                           -kInf, kNaN,   -1e30f,              5.0f};
  for (std::uint32_t bits = std::bit_cast<std::uint32_t>(-0.0f); bits <= std::bit_cast<std::uint32_t>(-100.0f);
       bits += 997)
    in.push_back(std::bit_cast<float>(bits));
  std::vector<float> out(in.size());
  cpu::exp_for_test(in.data(), out.data(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(canonical::exp_f32(in[i])))
        << "exp(" << in[i] << ")";
}

TEST_P(CpuBackendPerTarget, CombineGivesTheCanonicalBits) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  const float maxima[] = {-kInf, kInf, 0.0f, -0.0f, 3.5f};
  std::vector<canonical::Partial> a(4000), b(4000), out(4000);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = {i % 7 == 0 ? maxima[rng() % 5] : normal(rng), std::fabs(normal(rng)) + 1};
    b[i] = {i % 5 == 0 ? a[i].max : i % 11 == 0 ? maxima[rng() % 5] : normal(rng), std::fabs(normal(rng)) + 1};
    if (a[i].max == -kInf) a[i].sum = 0;
    if (b[i].max == -kInf) b[i].sum = 0;
  }
  cpu::combine_for_test(a.data(), b.data(), out.data(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const canonical::Partial want = canonical::combine(a[i], b[i]);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i].max), std::bit_cast<std::uint32_t>(want.max)) << i;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i].sum), std::bit_cast<std::uint32_t>(want.sum)) << i;
  }
}

// The whole output, bit for bit, against the `canonical` backend (the definition entry by entry):
// every row kind, 16-bit logits, temperatures and ranks, at V around the tile (64), the segment
// (1024) and the chunk (16384), where the loop's bounds change.
TEST_P(CpuBackendPerTarget, GivesTheCanonicalBitsAtEveryBoundary) {
  std::mt19937_64 rng(41);
  const Backend& canonical = *find_backend(kCanonicalName);
  for (const std::uint64_t vocab :
       {1ull, 63ull, 64ull, 65ull, 1023ull, 1024ull, 1025ull, 16383ull, 16384ull, 16385ull, 40000ull}) {
    BatchData batch = batch_of_mixed_kinds(3, vocab, rng);
    const LogitsDtype dtype = static_cast<LogitsDtype>(vocab % 3);
    if (dtype != LogitsDtype::f32) batch = with_dtype(batch, dtype);
    if (vocab % 2 == 1) batch.temperatures = std::vector<float>{0.05f, 1.0f, 2.7f};
    for (const std::uint32_t k : {0u, 5u, 255u}) {
      const bool ranks = k != 5;
      EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, ranks), run_backend(canonical, batch, k, ranks)))
          << "V " << vocab << " K " << k << " dtype " << dtype_name(dtype);
    }
  }
}

// x / T in both of the AVX-512 scan's forms (cpu::QuotientForm: this CPU runs one, the tests
// both). Rows of ordinary logits, whose quotients every output value shows, beside rows that hold
// the edges of the corrected reciprocal's range (in the split form half of a tile's quotients come
// from it where every magnitude of those vectors is in [2^-60, 2^60], the others from the
// divider): zeros, subnormals, magnitudes just inside and outside the range and -inf in any lane
// of a tile, +inf in the first row; and temperatures at and beyond the range's ends. Each quotient
// must be the IEEE one, which the canonical backend computes by division. The edges go in every
// other row only, and +inf in one: a row that holds +inf outputs NaN values whatever its
// quotients, and one that holds 2^60 shows the others' quotients in no bit (with both in every row,
// dropping the reciprocal's correction passed until 2026-12-07).
TEST_P(CpuBackendPerTarget, QuotientsAtTheCorrectedRangesEdgesGiveTheCanonicalBits) {
  const Backend& canonical = *find_backend(kCanonicalName);
  const float edges[] = {0.0f,    -0.0f,    1e-45f,         -1e-40f, 0x1p-60f, -0x1p-60f, 0x1.fffffep-61f,
                         0x1p60f, -0x1p60f, 0x1.000002p60f, -3e38f,  -kInf};
  const cpu::QuotientForm native = cpu::quotient_form();
  for (const auto form : {cpu::QuotientForm::divider, cpu::QuotientForm::divider_and_reciprocal}) {
    cpu::set_quotient_form(form);
    ASSERT_EQ(cpu::quotient_form(), form);
    std::mt19937_64 rng(47);
    for (const float temperature : {0.7f, 0x1p-60f, 0x1.fffffep-61f, 0x1p60f, 0x1.000002p60f, 1e-30f}) {
      BatchData batch = batch_of_one_kind(8, 2048, rng, RowKind::Normal);
      for (std::uint64_t r = 0; r < batch.rows; r += 2)
        for (std::uint64_t e = 0; e < 24; ++e)
          batch.row(r)[(r * 131 + e * 83) % 2048] = edges[(r + e) % std::size(edges)];
      batch.row(0)[7] = kInf;
      // In the second row, tiles whose only edge is a magnitude above the range, in vector 1 and
      // in vector 3 (the reciprocal's quotient of -3e38 by 0.7 is NaN, the IEEE one -inf), and
      // one in the range in vector 3 (the reciprocal's quotient of -2^60 by 1e-30, a T outside
      // it, is NaN, the IEEE one -inf).
      batch.row(1)[64 * 3 + 16 + 5] = -3e38f;
      batch.row(1)[64 * 7 + 48 + 9] = -3e38f;
      batch.row(1)[64 * 5 + 48 + 2] = -0x1p60f;
      batch.temperatures = std::vector<float>(batch.sampled_tokens.size(), temperature);
      for (const std::uint32_t k : {0u, 5u}) {
        const ResultData result = run_backend(cpu_backend(), batch, k, true);
        EXPECT_TRUE(same_bits(result, run_backend(canonical, batch, k, true)))
            << "T " << temperature << " K " << k << " split " << (form == cpu::QuotientForm::divider_and_reciprocal);
        // Rows whose quotients show: the second (ordinary) and the third (edges; not at T = 1e-30,
        // where 2^60 / T is +inf).
        EXPECT_FALSE(std::isnan(result.lp_logits[result.width])) << "T " << temperature << " K " << k;
        EXPECT_TRUE(temperature == 1e-30f || !std::isnan(result.lp_logits[2 * result.width])) << "T " << temperature;
      }
    }
  }
  cpu::set_quotient_form(native);
}

// The quotient form by CPUID is the one measured faster on this CPU as Linux names it: the divider
// alone on AMD's family 26 (Zen 5), the split elsewhere (tile_steps-inl.h, TileDivisor).
TEST(CpuQuotientForm, FollowsTheCpusVendorAndFamily) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  int family = -1;
  while (std::getline(cpuinfo, line) && (vendor.empty() || family < 0)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (key == "vendor_id") vendor = line.substr(line.find_first_not_of(' ', colon + 1));
    if (key == "cpu family") family = std::stoi(line.substr(colon + 1));
  }
  if (vendor.empty() || family < 0) GTEST_SKIP() << "no vendor_id and cpu family in /proc/cpuinfo";
  const bool zen5_or_later = vendor == "AuthenticAMD" && family >= 26;
  EXPECT_EQ(cpu::fastest_quotient_form(),
            zen5_or_later ? cpu::QuotientForm::divider : cpu::QuotientForm::divider_and_reciprocal)
      << vendor << " family " << family;
}

// A segment whose entries are all in exp's range but one, far below it (x - m = -1000), in any
// lane: the kernel takes exp's in-range form only when the segment's smallest lane says every
// entry is in range, so one lane left out of that minimum gives the far entry a wrong term (issue
// 26: deleting SmallestLane's fold survived the tests, and the campaign only at some seeds).
TEST_P(CpuBackendPerTarget, OneEntryBelowExpsRangeInAnyLaneGivesTheCanonicalBits) {
  std::mt19937_64 rng(45);
  const Backend& canonical = *find_backend(kCanonicalName);
  for (const std::uint64_t vocab : {1024ull, 2048ull}) {
    BatchData batch = batch_of_one_kind(64, vocab, rng, RowKind::Normal);
    for (std::uint64_t r = 0; r < batch.rows; ++r) batch.row(r)[(r * 17) % vocab] = -1000.0f;
    for (const std::uint32_t k : {0u, 5u}) {
      EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, true), run_backend(canonical, batch, k, true)))
          << "V " << vocab << " K " << k;
    }
  }
}

// SPEC §3's rows (only -inf, a +inf, a NaN, mostly masked), each kind in every row of its batch, at
// V from one entry to past a chunk: the segment max of only -inf must stay -inf (Highway's
// EMU128 MaxOfLanes would make it -FLT_MAX, a finite normalizer).
TEST_P(CpuBackendPerTarget, SpecialRowsGiveTheCanonicalBits) {
  std::mt19937_64 rng(44);
  const Backend& canonical = *find_backend(kCanonicalName);
  for (const RowKind kind : {RowKind::OnlyNegInf, RowKind::PlusInf, RowKind::OneNaN, RowKind::Masked}) {
    for (const std::uint64_t vocab : {1ull, 64ull, 1025ull, 16385ull}) {
      const BatchData batch = batch_of_one_kind(2, vocab, rng, kind);
      for (const std::uint32_t k : {0u, 3u}) {
        EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, true), run_backend(canonical, batch, k, true)))
            << "kind " << int(kind) << " V " << vocab << " K " << k;
      }
    }
  }
}

// NaN in every tile, in one of its four steps (16 entries apart in a logical lane), the step
// changing from row to row: a NaN must hide no entry of its lane from admission (on AVX-512 pass
// 1 tests a tile's lanewise max, which x86's maxps, returning its second operand when either is
// NaN, would have made the NaN's and not the entry's; and which vrangeps, returning a quiet NaN
// for a signaling one, would have lost with the next vrangeps: the campaign found a K = 1 row so),
// and the row must still be flagged NaN. Quiet and signaling NaNs; K = 1 and 3 take admission by
// segment maxima (3000 entries, 3 segments; 12000, 12), 20 a running threshold.
TEST_P(CpuBackendPerTarget, NaNInEveryTileHidesNoEntryOfItsLane) {
  std::mt19937_64 rng(46);
  const Backend& canonical = *find_backend(kCanonicalName);
  for (const bool signaling : {false, true}) {
    const float nan = signaling ? std::numeric_limits<float>::signaling_NaN() : kNaN;
    for (const std::uint64_t vocab : {3000u, 12000u}) {
      BatchData batch = batch_of_one_kind(8, vocab, rng, RowKind::Normal);
      for (std::uint64_t r = 0; r < batch.rows; ++r)
        for (std::uint64_t j = 0; j < batch.vocab; ++j)
          if (j % canonical::kTile / canonical::kLanes == r % canonical::kSteps) batch.row(r)[j] = nan;
      for (const std::uint32_t k : {1u, 3u, 20u}) {
        EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, true), run_backend(canonical, batch, k, true)))
            << (signaling ? "signaling" : "quiet") << " NaN, V " << vocab << ", K " << k;
      }
    }
  }
}

// A segment that holds a NaN is ranked by the largest of its numbers, taken entry by entry
// (row_kernel.cpp's holds_nan), and flags its row NaN even where its lanes' maxima are not finite
// (only -inf beside the NaN). Rows of 3000 entries (3 segments, the last ending in a partial
// tile), each with one such segment: the first, whose top entry is its first and the rest far
// below the other segments; the second, -inf but a NaN in its full tiles; the third, -inf but a
// NaN in its partial tile. K = 1 admits by segment maxima, 20 by a running threshold.
TEST_P(CpuBackendPerTarget, NaNSegmentsAreRankedByTheirLargestNumber) {
  std::mt19937_64 rng(47);
  const Backend& canonical = *find_backend(kCanonicalName);
  for (const bool signaling : {false, true}) {
    const float nan = signaling ? std::numeric_limits<float>::signaling_NaN() : kNaN;
    BatchData batch = batch_of_one_kind(6, 3000, rng, RowKind::Normal);
    for (std::uint64_t r = 0; r < batch.rows; ++r) {
      float* x = batch.row(r);
      const std::uint64_t first = 1024 * (r % 3), end = std::min<std::uint64_t>(first + 1024, 3000);
      for (std::uint64_t j = first; j < end; ++j) x[j] = r % 3 == 0 ? -20.0f : -kInf;
      if (r % 3 == 0) x[0] = 50.0f;
      x[r % 3 == 2 ? 2990 : first + 700] = nan;
    }
    for (const std::uint32_t k : {1u, 20u})
      EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, true), run_backend(canonical, batch, k, true)))
          << (signaling ? "signaling" : "quiet") << " NaN, K " << k;
  }
}

TEST_P(CpuBackendPerTarget, AgreesWithReferenceOnEveryRowKind) {
  std::mt19937_64 rng(42);
  ErrorStats errors;
  for (const RowKind kind : kAllKinds) {
    for (const int levels : {0, 1, 3, 5, 8}) {
      const BatchData batch = batch_of_one_kind(2, 1000 + rng() % 20000, rng, kind);
      EXPECT_EQ(agree_with_reference(batch, levels, errors), "") << "kind " << int(kind) << " levels " << levels;
    }
  }
  RecordProperty("max_abs_error", std::to_string(errors.max_abs_error));
  RecordProperty("max_ulp_error", std::to_string(errors.max_ulp_error));
}

TEST_P(CpuBackendPerTarget, AgreesWithReferenceAtEveryLevel) {
  std::mt19937_64 rng(43);
  ErrorStats errors;
  for (int levels = 0; levels <= kMaxLevels; ++levels) {
    // Vocabularies around K, below it and well above it (so compaction runs at every K).
    const std::uint64_t k = top_k(levels);
    for (const std::uint64_t vocab : {std::uint64_t{1}, k / 2 + 1, 3 * k + 700}) {
      const BatchData batch = batch_of_mixed_kinds(levels > 12 ? 1 : 2, vocab, rng);
      EXPECT_EQ(agree_with_reference(batch, levels, errors), "") << "levels " << levels << " V " << vocab;
    }
  }
}

TEST_P(CpuBackendPerTarget, AgreesWithReferenceAtLlamaVocabulary) {
  std::mt19937_64 rng(44);
  ErrorStats errors;
  for (const RowKind kind : {RowKind::Normal, RowKind::Ascending, RowKind::Bf16Ties}) {
    const BatchData batch = batch_of_one_kind(1, 128256, rng, kind);
    for (const int levels : {3, 8, 12}) {
      EXPECT_EQ(agree_with_reference(batch, levels, errors), "") << "kind " << int(kind) << " levels " << levels;
    }
  }
  RecordProperty("max_abs_error", std::to_string(errors.max_abs_error));
  RecordProperty("max_ulp_error", std::to_string(errors.max_ulp_error));
}

// Large K samples the row for a speculative threshold (candidate_buffer.hpp). Rows whose sampled
// entries are the only large ones make it lie: fewer than K entries reach it, and the backend
// must rescan. Also rows with fewer than K candidates at all.
TEST_P(CpuBackendPerTarget, RescansWhenTheSpeculativeThresholdLies) {
  ThreadCount restore;
  std::mt19937_64 rng(47);
  ErrorStats errors;
  for (const int levels : {8, 12}) {
    BatchData batch = batch_of_one_kind(2, 128256, rng, RowKind::Normal);
    for (std::uint64_t r = 0; r < batch.rows; ++r) {
      float* x = batch.row(r);
      for (std::uint64_t j = 0; j < batch.vocab; ++j) {
        const bool sampled = j % cpu::CandidateBuffer::kSampleStride < cpu::CandidateBuffer::kSampleRun;
        if (r % 2 == 0 && sampled) x[j] = 100.0f + float(j % 1000);  // the sample, and little else
        if (r % 2 == 1 && !sampled) x[j] = -kInf;                    // fewer than K candidates
      }
    }
    for (const int threads : {1, 4}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(agree_with_reference(batch, levels, errors), "") << "levels " << levels << " threads " << threads;
    }
  }
}

// Small K is admitted by segment maxima (cpu_backend.cpp): the scan admits nothing, then only the
// segments whose max beats the K-th largest segment max are admitted, in token order. Every row
// kind (sorted rows send whole segments through the buffer's seed, a constant row makes every
// segment a candidate and every entry a tie), each dtype, with and without temperatures, at K
// around half the segments (the limit); and rows built for its hazards: high segments among low
// ones (the seed reads across skipped segments), fewer candidates than K, +inf in more segments
// than K, and a tie at the K-th value in every segment with a NaN beside each.
TEST_P(CpuBackendPerTarget, AdmitsBySegmentMaximaWithTheCanonicalBits) {
  std::mt19937_64 rng(67);
  const Backend& canonical = *find_backend(kCanonicalName);
  const auto expect_canonical = [&](const BatchData& batch, std::uint32_t k, const std::string& what) {
    EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, true), run_backend(canonical, batch, k, true)))
        << what << " K " << k;
  };
  for (const std::uint64_t vocab : {2048ull, 2049ull, 14337ull, 40000ull}) {
    for (const LogitsDtype dtype : {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16}) {
      BatchData batch = batch_of_mixed_kinds(4, vocab, rng);
      if (dtype != LogitsDtype::f32) batch = with_dtype(batch, dtype);
      if (rng() % 2 == 0) batch.temperatures = std::vector<float>{0.05f, 1.0f, 2.7f, 0.6f};
      for (const std::uint32_t k : {1u, 2u, 7u, 8u, 20u, 64u})
        expect_canonical(batch, k, "V " + std::to_string(vocab) + " dtype " + std::string(dtype_name(dtype)));
    }
  }
  constexpr std::uint64_t kVocab = 40 * canonical::kSegment + 100;
  std::vector<float> x(kVocab);
  for (std::uint64_t j = 0; j < kVocab; ++j) x[j] = (j / canonical::kSegment) % 2 == 0 ? 0.001f * float(j) : -100.0f;
  for (const std::uint32_t k : {7u, 20u}) expect_canonical(single_row_batch(x, 5), k, "high segments among low ones");
  std::fill(x.begin(), x.end(), -kInf);
  x[3] = 1.0f, x[5000] = 2.0f, x[kVocab - 1] = 3.0f;
  expect_canonical(single_row_batch(x, 5000), 7, "three candidates");
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& v : x) v = normal(rng);
  for (std::uint64_t s = 0; s < 30; ++s) x[s * canonical::kSegment + 7] = kInf;
  expect_canonical(single_row_batch(x, 7), 20, "+inf in 30 segments");
  for (float& v : x) v = normal(rng) - 20.0f;
  for (std::uint64_t s = 0; s < 40; ++s) x[s * canonical::kSegment + 16] = 5.0f, x[s * canonical::kSegment] = kNaN;
  expect_canonical(single_row_batch(x, 16), 7, "a tie in every segment");
}

// Large K is cut from the row after a scan that admits nothing (cpu_backend.cpp's cut_from_row:
// from the K where the speculation stops, CandidateBuffer::sample_plan), with padding past a row's
// candidates where it has fewer than K, and rows the cut cannot take (a NaN, +inf) go the buffer's
// way after all: every row kind, each dtype, with and without temperatures and ranks, bit for bit
// against `canonical`; K on either side of that boundary (at V = 4096 and 5000 it is K = 255,
// where the speculation would start), and up to V - 1.
TEST_P(CpuBackendPerTarget, CutsLargeKFromTheRowWithTheCanonicalBits) {
  std::mt19937_64 rng(57);
  const Backend& canonical = *find_backend(kCanonicalName);
  for (const std::uint64_t vocab : {4096ull, 5000ull, 40000ull}) {
    std::uint32_t cut_from = cpu::CandidateBuffer::kSpeculationFromK;
    while (cpu::CandidateBuffer::sample_plan(cut_from, vocab).lines != 0) ++cut_from;
    const std::uint32_t last = std::uint32_t(vocab - 1);
    for (const LogitsDtype dtype : {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16}) {
      // The kinds in turn, those the cut treats apart first (5 items hold at least 5 rows): a
      // masked row has V / 4 candidates, fewer than K from the middle K on.
      BatchData batch = make_batch(5, vocab, rng, [turn = std::size_t{0}](std::mt19937_64&) mutable {
        constexpr RowKind kinds[] = {RowKind::Masked,    RowKind::OnlyNegInf, RowKind::OneNaN,
                                     RowKind::PlusInf,   RowKind::Bf16Ties,   RowKind::Normal,
                                     RowKind::Ascending, RowKind::Descending, RowKind::Constant};
        return kinds[turn++ % std::size(kinds)];
      });
      if (dtype != LogitsDtype::f32) batch = with_dtype(batch, dtype);
      for (const bool temperatures : {false, true}) {
        if (temperatures) batch.temperatures = std::vector<float>{0.05f, 1.0f, 2.7f, 1.0f, 0.6f};
        for (const std::uint32_t k : {cut_from - 1, cut_from, (cut_from + last) / 2, last}) {
          EXPECT_TRUE(same_bits(run_backend(cpu_backend(), batch, k, temperatures),
                                run_backend(canonical, batch, k, temperatures)))
              << "V " << vocab << " K " << k << " dtype " << dtype_name(dtype) << " temperatures " << temperatures;
        }
      }
    }
  }
}

TEST_P(CpuBackendPerTarget, BitwiseIdenticalWithAnyThreadCount) {
  ThreadCount restore;
  std::mt19937_64 rng(45);
  // 1 row (whole-row scan vs split into chunks) and 3 rows (split with 4 threads).
  for (const std::uint64_t items : {1, 2}) {
    const BatchData batch = batch_of_mixed_kinds(items, 60000 + rng() % 70000, rng);
    for (const int levels : {0, 4, 9}) {
      omp_set_num_threads(1);
      const ResultData one = run_backend(cpu_backend(), batch, top_k(levels));
      for (const int threads : {2, 4, 7}) {
        omp_set_num_threads(threads);
        EXPECT_TRUE(same_bits(one, run_backend(cpu_backend(), batch, top_k(levels))))
            << threads << " threads, " << items << " items, levels " << levels;
      }
    }
  }
}

TEST_P(CpuBackendPerTarget, RowBitsDoNotDependOnTheBatch) {
  std::mt19937_64 rng(46);
  const BatchData batch = batch_of_mixed_kinds(6, 40000, rng);
  const int levels = 6;
  const ResultData together = run_backend(cpu_backend(), batch, top_k(levels));
  const auto tasks = plan_rows(batch.view());
  for (const RowTask& task : tasks) {
    const ResultData single =
        run_backend(cpu_backend(), single_row_batch(batch.view().logit_row(task.logit_row), task.token), top_k(levels));
    EXPECT_TRUE(same_row_bits(together, task.output_row, single, 0)) << "row " << task.output_row;
  }
}

// Each variant `cpu-<target>` runs that target's kernel whatever the CPU offers: it gives the bits
// `cpu` gives when Highway is held to that target, and (SPEC §8) every target gives the same
// bits, the canonical backend's. Every target this CPU runs has its variant.
TEST(CpuVariants, EachGivesTheBitsOfCpuHeldToItsTarget) {
  std::mt19937_64 rng(53);
  const BatchData batch = batch_of_mixed_kinds(6, 40000, rng);
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    const std::string name = "cpu-" + lowercase(hwy::TargetName(target));
    const Backend* variant = find_backend(name);
    ASSERT_NE(variant, nullptr) << name;
    EXPECT_EQ(variant->variant_of(), "cpu");
    EXPECT_TRUE(variant->availability().available) << name;
    hwy::SetSupportedTargetsForTest(target);
    const ResultData held = run_backend(cpu_backend(), batch, top_k(5));
    hwy::SetSupportedTargetsForTest(0);
    EXPECT_TRUE(same_bits(run_backend(*variant, batch, top_k(5)), held)) << name;
    EXPECT_TRUE(same_bits(held, run_backend(*find_backend(kCanonicalName), batch, top_k(5)))) << name;
    ErrorStats errors;
    EXPECT_EQ(agree_with_reference(*variant, batch, 5, errors), "") << name;
  }
}

}  // namespace
}  // namespace logprobs
