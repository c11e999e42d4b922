// Differential fuzzing: the fuzzer's bytes become a valid batch (offsets valid by construction;
// logits from a palette of special values, raw float bits, and ties, in any dtype; temperatures
// sometimes), a K and a ranks request, and every available host backend that implements them
// must agree with the reference by SPEC §5, and give the canonical bits if it claims SPEC §8.
// The reference's own tokens are judged against the input too. A disagreement prints its
// violations and aborts, so libFuzzer keeps the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "harness/half_precision.hpp"
#include "harness/host_backends.hpp"
#include "harness/judge.hpp"

namespace logprobs::fuzz {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Bounds that keep one input to milliseconds.
constexpr std::uint64_t kMaxOutputSlots = std::uint64_t{1} << 18;
constexpr std::uint64_t kMaxLogits = std::uint64_t{1} << 15;

// Logits. Each row has a share of plain N(0, 3) values; the others come from a palette of
// special values, small integers (ties) and raw float bits. Every choice is read from the bytes
// while they last, then drawn from a generator seeded by them, so special values can appear
// anywhere in a row, also at its end.
class LogitSource {
 public:
  explicit LogitSource(FuzzedDataProvider& in) : in_(in), rng_(in.ConsumeIntegral<std::uint32_t>()) {}

  // Out of 256 values of the next row, how many are plain.
  std::uint8_t row_plain_share() { return byte(); }

  float next(std::uint8_t plain_share) {
    if (byte() < plain_share) return normal();
    const std::uint8_t tag = byte();
    switch (tag % 16) {
      case 0: return kNaN;
      case 1: return kInf;
      case 2: return -kInf;
      case 3: return 0.0f;
      case 4: return -0.0f;
      case 5: return std::numeric_limits<float>::max();
      case 6: return std::numeric_limits<float>::lowest();
      case 7: return std::numeric_limits<float>::denorm_min();
      case 8: case 9: case 10: case 11: return static_cast<float>(tag >> 4) - 8.0f;
      case 12: case 13: return std::bit_cast<float>(word());
      default: return normal();
    }
  }

 private:
  std::uint8_t byte() { return in_.remaining_bytes() > 0 ? in_.ConsumeIntegral<std::uint8_t>() : rng_() & 0xFF; }
  std::uint32_t word() { return in_.remaining_bytes() > 0 ? in_.ConsumeIntegral<std::uint32_t>() : rng_(); }
  float normal() { return std::normal_distribution<float>(0.0f, 3.0f)(rng_); }

  FuzzedDataProvider& in_;
  std::mt19937 rng_;
};

struct Case {
  BatchData batch;
  std::uint32_t k = 0;
  bool ranks = false;
};

// A temperature from a palette (1 exactly, sharp, flat) or raw bits made a finite positive f32.
float temperature(FuzzedDataProvider& in) {
  static constexpr float kPalette[] = {1.0f, 0.05f, 0.3f, 0.7f, 2.5f, 4.0f};
  if (in.ConsumeBool()) return kPalette[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kPalette) - 1)];
  const float t = std::fabs(std::bit_cast<float>(in.ConsumeIntegral<std::uint32_t>()));
  return std::isfinite(t) && t > 0.0f ? t : 1.0f;
}

Case case_from(FuzzedDataProvider& in) {
  Case c;
  BatchData& batch = c.batch;
  LogitSource logits(in);

  // Offsets first (valid by construction), then V, then the tokens, which must be below V.
  struct Item {
    std::uint32_t rows, outputs, tokens;
  };
  std::vector<Item> items(in.ConsumeIntegralInRange(0, 6));
  for (Item& item : items) {
    item.rows = in.ConsumeIntegralInRange<std::uint32_t>(0, 4);
    item.outputs = in.ConsumeIntegralInRange<std::uint32_t>(0, item.rows);
    item.tokens = (item.outputs == 0 ? 0 : item.outputs - 1) + in.ConsumeIntegralInRange<std::uint32_t>(0, 2);
  }
  const auto unowned_rows = in.ConsumeIntegralInRange<std::uint32_t>(0, 2);
  std::uint64_t rows = unowned_rows;
  for (const Item& item : items) rows += item.rows;

  // V past SIMD widths and chunk sizes one time in four, within kMaxLogits in all.
  const bool wide_vocab = in.ConsumeIntegralInRange(0, 3) == 0;
  const std::uint64_t max_vocab = std::min<std::uint64_t>(wide_vocab ? 5000 : 40, kMaxLogits / std::max<std::uint64_t>(rows, 1) - 3);
  batch.vocab = in.ConsumeIntegralInRange<std::uint64_t>(1, max_vocab);
  batch.row_stride = batch.vocab + in.ConsumeIntegralInRange(0, 3);
  batch.rows = rows;
  const auto token = [&] { return in.ConsumeIntegralInRange<std::uint32_t>(0, batch.vocab - 1); };

  batch.logit_row_offsets = {0};
  batch.token_row_offsets = {0};
  batch.lp_output_offsets = {0};
  for (const Item& item : items) {
    batch.logit_row_offsets.push_back(batch.logit_row_offsets.back() + item.rows);
    batch.token_row_offsets.push_back(batch.token_row_offsets.back() + item.tokens);
    batch.lp_output_offsets.push_back(batch.lp_output_offsets.back() + item.outputs);
    for (std::uint32_t t = 0; t < item.tokens; ++t) batch.tokens.push_back(token());
    batch.sampled_tokens.push_back(token());
  }

  // K of MAX's form or any, within the output bound; ranks asked or not.
  c.k = in.ConsumeBool() ? top_k(in.ConsumeIntegralInRange(0, kMaxLevels))
                         : in.ConsumeIntegralInRange<std::uint32_t>(0, kMaxK);
  while (c.k > 0 && batch.lp_output_offsets.back() * slots_per_row(c.k) > kMaxOutputSlots) c.k /= 2;
  c.ranks = in.ConsumeBool();
  const LogitsDtype dtype = static_cast<LogitsDtype>(in.ConsumeIntegralInRange(0, 2));
  if (in.ConsumeBool()) {
    batch.temperatures.emplace();
    for (std::size_t b = 0; b < items.size(); ++b) batch.temperatures->push_back(temperature(in));
  }

  // Stride padding is NaN, so a backend that reads past V disagrees.
  batch.logits.assign(batch.rows * batch.row_stride, kNaN);
  for (std::uint64_t i = 0; i < batch.rows; ++i) {
    const std::uint8_t plain_share = logits.row_plain_share();
    for (std::uint64_t j = 0; j < batch.vocab; ++j) batch.row(i)[j] = logits.next(plain_share);
  }
  batch = with_dtype(batch, dtype);  // 16-bit: the values rounded, NaN payloads and infinities kept
  return c;
}

void report_and_abort(const Case& c, std::string_view backend, const std::vector<Violation>& violations,
                      const std::string& note = "") {
  std::fprintf(
      stderr, "fuzz_differential: %.*s disagrees with the reference (B %zu, V %zu, rows %zu, K %u, ranks %d):\n",
      static_cast<int>(backend.size()), backend.data(), static_cast<std::size_t>(c.batch.sampled_tokens.size()),
      static_cast<std::size_t>(c.batch.vocab), static_cast<std::size_t>(c.batch.rows), c.k, int(c.ranks));
  for (std::size_t i = 0; i < violations.size() && i < 20; ++i) std::fprintf(stderr, "  %s\n", violations[i].message().c_str());
  if (!note.empty()) std::fprintf(stderr, "  %s\n", note.c_str());
  std::abort();
}

}  // namespace
}  // namespace logprobs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace logprobs;
  FuzzedDataProvider in(data, size);
  const fuzz::Case c = fuzz::case_from(in);
  const ResultData reference = run_backend(reference_backend(), c.batch, c.k, c.ranks);
  const std::vector<const Backend*> backends = available_host_backends();
  const std::optional<ResultData> canonical = canonical_result(backends, c.batch, c.k, c.ranks);
  for (const Backend* backend : backends) {
    if (!missing_part(backend->features(), c.batch.view(), c.k, c.ranks).empty()) continue;
    const ResultData got = backend->name() == kReferenceName ? reference : run_backend(*backend, c.batch, c.k, c.ranks);
    const Verdict verdict = compare_result(c.batch, c.k, reference, got, tolerance_for(*backend, {}));
    if (!verdict.ok()) fuzz::report_and_abort(c, backend->name(), verdict.violations);
    if (canonical && backend->claims_canonical_arithmetic()) {
      if (const std::string difference = first_bit_difference(got, *canonical); !difference.empty())
        fuzz::report_and_abort(c, backend->name(), {}, "SPEC 8: bits differ from the canonical arithmetic's at " + difference);
    }
  }
  return 0;
}
