// SPEC §5 and §6 as RapidCheck properties, for every registered backend available here: agreement
// with the reference (greedy-exactness and ranks included, the comparator's rules), shift
// invariance, top values summing to 1 when K >= V, temperature 1 changing no bit, batch
// invariance and determinism (repeat runs and thread counts). A backend is held only to the
// optional parts it declares (SPEC §4); a case that needs another skips it.
//
// The default case count is modest so that the suite stays fast on a 2-core CI machine;
// RC_PARAMS="max_success=1000" (or a seed) raises it for a local soak.
#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "fuzz/generators.hpp"
#include "harness/half_precision.hpp"
#include "harness/judge.hpp"

namespace logprobs {
namespace {

// Before RapidCheck first reads its configuration; an RC_PARAMS from the environment wins.
const bool kModestCaseCount = [] { return ::setenv("RC_PARAMS", "max_success=25", /*overwrite=*/0) == 0; }();

// At most 2^20 output slots (4 MB per output array): a case with many output rows gets a lower K.
constexpr std::uint64_t kSlotBudget = std::uint64_t{1} << 20;

std::uint32_t draw_k(const BatchData& batch) {
  const std::uint32_t k = *gen::k();
  const std::uint64_t rows = std::max<std::uint64_t>(batch.lp_output_offsets.back(), 1);
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(k, kSlotBudget / rows - 1));
}

// The available backends that implement what the case needs.
std::vector<const Backend*> backends_for(const BatchData& batch, std::uint32_t k, bool ranks) {
  std::vector<const Backend*> out;
  for (const Backend* b : all_backends())
    if (b->availability().available && missing_part(b->features(), batch.view(), k, ranks).empty()) out.push_back(b);
  return out;
}

std::string describe(const Backend& backend, std::uint32_t k, const BackendOutcome& o) {
  std::string s = std::string(backend.name()) + " at K = " + std::to_string(k) + ": ";
  if (!o.error.empty()) return s + "threw " + o.error;
  if (o.verdict.ok()) return s + o.canonical_difference;
  s += o.verdict.violations.front().message();
  if (o.verdict.violations.size() > 1) s += " (and " + std::to_string(o.verdict.violations.size() - 1) + " more)";
  return s;
}

// Results of backends that claim SPEC §8 held to the canonical bits, for the count printed at the end.
std::uint64_t canonical_checks = 0;

class PrintCanonicalChecks : public ::testing::Environment {
  void TearDown() override {
    std::printf("results held to SPEC 8's canonical bits: %llu\n", static_cast<unsigned long long>(canonical_checks));
  }
};
const auto* const kPrintCanonicalChecks = ::testing::AddGlobalTestEnvironment(new PrintCanonicalChecks);

// Every backend that implements the case, against the reference, and those that claim SPEC §8
// against the canonical bits; the first violation, or "".
std::string disagreement(const BatchData& batch, std::uint32_t k, bool ranks) {
  const ResultData want = run_backend(reference_backend(), batch, k);
  const std::vector<const Backend*> backends = backends_for(batch, k, ranks);
  const std::optional<ResultData> canonical = canonical_result(backends, batch, k, ranks);
  for (const Backend* backend : backends) {
    const BackendOutcome o = judge_backend(*backend, batch, k, ranks, want, {}, canonical ? &*canonical : nullptr);
    if (canonical && backend->claims_canonical_arithmetic()) ++canonical_checks;
    if (!o.ok()) return describe(*backend, k, o);
  }
  return "";
}

RC_GTEST_PROP(Properties, EveryBackendAgreesWithTheReference, ()) {
  const BatchData batch = *gen::batch();
  const std::uint32_t k = draw_k(batch);
  const bool ranks = *rc::gen::arbitrary<bool>();
  if (const std::string problem = disagreement(batch, k, ranks); !problem.empty()) RC_FAIL(problem);
}

// MAX's K at every levels and the usual other K, each with a different offset and value shape
// and every dtype, on seeded batches (so every K is covered on every run, whatever RapidCheck
// draws).
TEST(Properties, EveryBackendAgreesAtEveryK) {
  constexpr gen::OffsetShape kOffsets[] = {gen::OffsetShape::no_echo, gen::OffsetShape::echo,
                                           gen::OffsetShape::arbitrary};
  constexpr gen::ValueShape kValues[] = {
      gen::ValueShape::normal,    gen::ValueShape::bf16,       gen::ValueShape::large, gen::ValueShape::constant,
      gen::ValueShape::ascending, gen::ValueShape::descending, gen::ValueShape::peaked};
  constexpr LogitsDtype kDtypes[] = {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16};
  std::vector<std::uint32_t> ks = {5, 20, 100, 1000};
  for (int levels = 0; levels <= kMaxLevels; ++levels) ks.push_back(top_k(levels));
  for (std::size_t i = 0; i < ks.size(); ++i) {
    for (std::uint64_t seed = 0; seed < 2; ++seed) {
      const auto generator = gen::batch(kOffsets[(i + seed) % 3], kValues[(i + seed) % 7]);
      const BatchData drawn = generator(rc::Random(100 * i + seed), 30).value();
      const BatchData batch = with_dtype(widened_to_f32(drawn), kDtypes[(i + seed) % 3]);
      EXPECT_EQ(disagreement(batch, ks[i], seed == 1), "");
    }
  }
}

// Adds c to every logit. c is a small power of two, so only the f32 rounding of x + c (at most
// half an ulp of |x| + |c|, for x and for the row max) moves a value beyond each run's own error.
BatchData shifted(const BatchData& batch, float c) {
  BatchData out = batch;
  for (float& x : out.logits) x += c;
  return out;
}

float largest_finite_magnitude(std::span<const float> x) {
  float m = 0;
  for (const float v : x)
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  return m;
}

// The values of the top slots, descending; the padding slots' values last.
std::vector<float> sorted_top_values(const ResultData& r, std::uint64_t row, std::uint32_t k) {
  std::vector<float> v(r.lp_logits.begin() + row * r.width, r.lp_logits.begin() + row * r.width + k);
  std::sort(v.begin(), v.end(), [](float a, float b) { return a > b || (!std::isnan(a) && std::isnan(b)); });
  return v;
}

// On f32 logits without temperatures, where adding c moves x by c exactly but for rounding.
RC_GTEST_PROP(Properties, ShiftingARowLeavesItsLogProbabilities, ()) {
  BatchData batch = widened_to_f32(*gen::batch());
  batch.temperatures.reset();
  const std::uint32_t k = draw_k(batch);
  const float c = *rc::gen::element(-16.0f, -1.0f, 0.5f, 8.0f, 64.0f);
  const BatchData moved = shifted(batch, c);
  for (const Backend* backend : backends_for(batch, k, false)) {
    const Tolerance tolerance = tolerance_for(*backend, {});
    const ResultData before = run_backend(*backend, batch, k);
    const ResultData after = run_backend(*backend, moved, k);
    for (const RowTask& task : plan_rows(batch.view())) {
      const auto x = batch.view().logit_row(task.logit_row);
      const RowTolerance row_before = row_tolerance(x, tolerance);
      const RowTolerance row_after = row_tolerance(moved.view().logit_row(task.logit_row), tolerance);
      const double rounding = 2 * ulp_f32(largest_finite_magnitude(x) + std::fabs(c));
      std::vector<float> want = sorted_top_values(before, task.output_row, k);
      std::vector<float> got = sorted_top_values(after, task.output_row, k);
      want.push_back(before.value(task.output_row, k));  // the evaluated token's slot
      got.push_back(after.value(task.output_row, k));
      for (std::size_t i = 0; i < want.size(); ++i) {
        const bool same_special = std::isnan(want[i]) ? std::isnan(got[i]) : want[i] == got[i];
        if (!std::isfinite(want[i]) || !std::isfinite(got[i])) {
          RC_ASSERT(same_special);
          continue;
        }
        const double allowed = row_before.allowed(want[i]) + row_after.allowed(got[i]) + rounding;
        if (!(std::fabs(double(got[i]) - want[i]) <= allowed))
          RC_FAIL(std::string(backend->name()) + ": output row " + std::to_string(task.output_row) + " value " +
                  std::to_string(i) + " moved from " + std::to_string(want[i]) + " to " + std::to_string(got[i]) +
                  " when the logits moved by " + std::to_string(c));
      }
    }
  }
}

// The batch's first `items` batch items (the rest of its arrays stays, unread).
BatchData first_items(BatchData batch, std::size_t items) {
  batch.sampled_tokens.resize(items);
  batch.logit_row_offsets.resize(items + 1);
  batch.token_row_offsets.resize(items + 1);
  batch.lp_output_offsets.resize(items + 1);
  if (batch.temperatures) batch.temperatures->resize(items);
  return batch;
}

RC_GTEST_PROP(Properties, TopValuesSumToOneWhenKCoversTheVocab, ()) {
  const BatchData drawn = *gen::batch();
  RC_PRE(drawn.vocab <= kMaxK);
  const auto k = *rc::gen::resize(100, rc::gen::inRange<std::uint32_t>(std::uint32_t(drawn.vocab), kMaxK + 1));
  // A wide K comes with few output rows: keep the items whose outputs fit in the slot budget.
  std::size_t items = drawn.sampled_tokens.size();
  while (items > 0 && std::uint64_t(drawn.lp_output_offsets[items]) * slots_per_row(k) > kSlotBudget) --items;
  const BatchData batch = first_items(drawn, items);
  const auto vocab = static_cast<std::uint32_t>(batch.vocab);
  std::vector<float> x(vocab);
  for (const Backend* backend : backends_for(batch, k, false)) {
    const ResultData r = run_backend(*backend, batch, k);
    for (const RowTask& task : plan_rows(batch.view())) {
      read_row(batch.view(), task, x);
      const bool finite_normalizer =
          std::none_of(x.begin(), x.end(), [](float v) { return std::isnan(v) || v == INFINITY; }) &&
          std::any_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
      if (!finite_normalizer) continue;  // SPEC §3: every value NaN
      const RowTolerance row = row_tolerance(x, tolerance_for(*backend, {}));
      double sum = 0, allowed = 0;
      for (std::uint32_t slot = 0; slot < k; ++slot) {
        if (r.token(task.output_row, slot) == vocab) continue;
        const float v = r.value(task.output_row, slot);
        sum += std::exp(double(v));
        allowed = std::max(allowed, row.allowed(v));
      }
      if (!(std::fabs(sum - 1) <= allowed))
        RC_FAIL(std::string(backend->name()) + ": output row " + std::to_string(task.output_row) +
                ": exponentials of the top values sum to " + std::to_string(sum));
    }
  }
}

// SPEC §2.5: x / 1 is x in IEEE f32, so temperatures of 1 give the bits of no temperatures.
RC_GTEST_PROP(Properties, TemperatureOneChangesNoBit, ()) {
  BatchData plain = *gen::batch();
  plain.temperatures.reset();
  BatchData with_ones = plain;
  with_ones.temperatures = std::vector<float>(plain.sampled_tokens.size(), 1.0f);
  const std::uint32_t k = draw_k(plain);
  for (const Backend* backend : backends_for(with_ones, k, false))
    if (!same_bits(run_backend(*backend, plain, k), run_backend(*backend, with_ones, k)))
      RC_FAIL(std::string(backend->name()) + ": temperatures of 1 change the bits");
}

RC_GTEST_PROP(Properties, ARowsBitsDoNotDependOnTheRestOfTheBatch, ()) {
  const BatchData batch = *gen::batch();
  const std::uint32_t k = draw_k(batch);
  const bool ranks = *rc::gen::arbitrary<bool>();
  const std::vector<RowTask> tasks = plan_rows(batch.view());
  RC_PRE(!tasks.empty());
  // A few rows per case: each costs a run of its own.
  std::vector<RowTask> picked;
  for (int i = 0; i < 3; ++i) picked.push_back(tasks[*rc::gen::inRange<std::size_t>(0, tasks.size())]);
  for (const Backend* backend : backends_for(batch, k, ranks)) {
    const ResultData whole = run_backend(*backend, batch, k, ranks);
    for (const RowTask& task : picked) {
      const ResultData single = run_backend(*backend, row_alone(batch, task), k, ranks);
      if (!same_row_bits(whole, task.output_row, single, 0))
        RC_FAIL(std::string(backend->name()) + ": output row " + std::to_string(task.output_row) +
                " differs in bits when computed alone");
    }
  }
}

// Runs `f` with OpenMP limited to `threads`, restoring the previous limit.
ResultData with_threads(int threads, const std::function<ResultData()>& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  ResultData r = f();
  omp_set_num_threads(before);
  return r;
}

RC_GTEST_PROP(Properties, RunsAndThreadCountsGiveIdenticalBits, ()) {
  const BatchData batch = *gen::batch();
  const std::uint32_t k = draw_k(batch);
  const bool ranks = *rc::gen::arbitrary<bool>();
  for (const Backend* backend : backends_for(batch, k, ranks)) {
    const auto run = [&] { return run_backend(*backend, batch, k, ranks); };
    const ResultData first = run();
    if (!same_bits(first, run())) RC_FAIL(std::string(backend->name()) + ": a second run differs in bits");
    for (const int threads : {1, 2, 3}) {
      if (!same_bits(first, with_threads(threads, run)))
        RC_FAIL(std::string(backend->name()) + ": " + std::to_string(threads) + " threads differ in bits");
    }
  }
}

}  // namespace
}  // namespace logprobs
