// SPEC §5 and §6 as RapidCheck properties, for every registered backend available here: agreement
// with the reference, shift invariance, top values summing to 1 when K >= V, batch invariance
// and determinism (repeat runs and thread counts).
//
// The default case count is modest so that the suite stays fast on a 2-core CI machine;
// RC_PARAMS="max_success=1000" (or a seed) raises it for a local soak.
#include <gtest/gtest.h>
#include <omp.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "fuzz/generators.hpp"
#include "harness/comparator.hpp"

namespace logprobs {
namespace {

// Before RapidCheck first reads its configuration; an RC_PARAMS from the environment wins.
const bool kModestCaseCount = [] { return ::setenv("RC_PARAMS", "max_success=25", /*overwrite=*/0) == 0; }();

std::vector<const Backend*> available_backends() {
  std::vector<const Backend*> out;
  for (const Backend* b : all_backends())
    if (b->availability().available) out.push_back(b);
  return out;
}

std::string describe(const Backend& backend, int levels, const Verdict& v) {
  std::string s = std::string(backend.name()) + " at levels " + std::to_string(levels) + ": " +
                  v.violations.front().message();
  if (v.violations.size() > 1) s += " (and " + std::to_string(v.violations.size() - 1) + " more)";
  return s;
}

// Levels 0..16, but at most 2^20 output slots (4 MB per output array): a case with many output
// rows gets lower levels. EveryBackendAgreesAtEveryLevel covers every level on every run.
int draw_levels(const BatchData& batch) {
  int highest = kMaxLevels;
  while (highest > 0 && batch.lp_output_offsets.back() * slots_per_row(highest) > (1u << 20)) --highest;
  return *rc::gen::resize(100, rc::gen::inRange(0, highest + 1));
}

void check_agreement(const BatchData& batch, int levels) {
  const ResultData want = run_backend(reference_backend(), batch, levels);
  for (const Backend* backend : available_backends()) {
    const Verdict v = compare_result(batch, levels, want, run_backend(*backend, batch, levels));
    if (!v.ok()) RC_FAIL(describe(*backend, levels, v));
  }
}

RC_GTEST_PROP(Properties, EveryBackendAgreesWithTheReference, ()) {
  const BatchData batch = *gen::batch();
  check_agreement(batch, draw_levels(batch));
}

// Every levels 0..16, each with a different offset and value shape, on seeded batches (so every
// level is covered on every run, whatever RapidCheck draws).
TEST(Properties, EveryBackendAgreesAtEveryLevel) {
  constexpr gen::OffsetShape kOffsets[] = {gen::OffsetShape::no_echo, gen::OffsetShape::echo,
                                           gen::OffsetShape::arbitrary};
  constexpr gen::ValueShape kValues[] = {gen::ValueShape::normal,   gen::ValueShape::bf16,
                                         gen::ValueShape::large,    gen::ValueShape::constant,
                                         gen::ValueShape::ascending, gen::ValueShape::descending,
                                         gen::ValueShape::peaked};
  for (int levels = 0; levels <= kMaxLevels; ++levels) {
    for (std::uint64_t seed = 0; seed < 2; ++seed) {
      const auto generator = gen::batch(kOffsets[(levels + seed) % 3], kValues[(levels + seed) % 7]);
      const BatchData batch = generator(rc::Random(100 * levels + seed), 30).value();
      const ResultData want = run_backend(reference_backend(), batch, levels);
      for (const Backend* backend : available_backends()) {
        const Verdict v = compare_result(batch, levels, want, run_backend(*backend, batch, levels));
        EXPECT_TRUE(v.ok()) << (v.ok() ? "" : describe(*backend, levels, v));
      }
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

RC_GTEST_PROP(Properties, ShiftingARowLeavesItsLogProbabilities, ()) {
  const BatchData batch = *gen::batch();
  const int levels = draw_levels(batch);
  const float c = *rc::gen::element(-16.0f, -1.0f, 0.5f, 8.0f, 64.0f);
  const BatchData moved = shifted(batch, c);
  const std::uint32_t k = top_k(levels);
  const Tolerance tolerance;
  for (const Backend* backend : available_backends()) {
    const ResultData before = run_backend(*backend, batch, levels);
    const ResultData after = run_backend(*backend, moved, levels);
    for (const RowTask& task : plan_rows(batch.view())) {
      const auto x = batch.view().logit_row(task.logit_row);
      const double m = largest_finite_logit(x);
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
        const double allowed = 2 * allowed_error(want[i], m, batch.vocab, tolerance) + rounding;
        if (!(std::fabs(double(got[i]) - want[i]) <= allowed))
          RC_FAIL(std::string(backend->name()) + ": output row " + std::to_string(task.output_row) + " value " +
                  std::to_string(i) + " moved from " + std::to_string(want[i]) + " to " + std::to_string(got[i]) +
                  " when the logits moved by " + std::to_string(c));
      }
    }
  }
}

// The levels with K = 2^levels - 1 >= V.
int levels_covering(std::uint64_t vocab) {
  int levels = 0;
  while (top_k(levels) < vocab) ++levels;
  return levels;
}

// The batch's first `items` batch items (the rest of its arrays stays, unread).
BatchData first_items(BatchData batch, std::size_t items) {
  batch.sampled_tokens.resize(items);
  batch.logit_row_offsets.resize(items + 1);
  batch.token_row_offsets.resize(items + 1);
  batch.lp_output_offsets.resize(items + 1);
  return batch;
}

RC_GTEST_PROP(Properties, TopValuesSumToOneWhenKCoversTheVocab, ()) {
  const BatchData drawn = *gen::batch();
  RC_PRE(drawn.vocab <= top_k(kMaxLevels));
  const int levels = *rc::gen::resize(100, rc::gen::inRange(levels_covering(drawn.vocab), kMaxLevels + 1));
  // High levels come with few output rows: keep the items whose outputs fit in 2^20 slots.
  std::size_t items = drawn.sampled_tokens.size();
  while (items > 0 && std::uint64_t(drawn.lp_output_offsets[items]) * slots_per_row(levels) > (1u << 20)) --items;
  const BatchData batch = first_items(drawn, items);
  const std::uint32_t k = top_k(levels);
  const auto vocab = static_cast<std::uint32_t>(batch.vocab);
  for (const Backend* backend : available_backends()) {
    const ResultData r = run_backend(*backend, batch, levels);
    for (const RowTask& task : plan_rows(batch.view())) {
      const auto x = batch.view().logit_row(task.logit_row);
      const bool finite_normalizer = std::none_of(x.begin(), x.end(), [](float v) { return std::isnan(v) || v == INFINITY; }) &&
                                     std::any_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
      if (!finite_normalizer) continue;  // SPEC §3: every value NaN
      const double m = largest_finite_logit(x);
      double sum = 0, allowed = 0;
      for (std::uint32_t slot = 0; slot < k; ++slot) {
        if (r.token(task.output_row, slot) == vocab) continue;
        const float v = r.value(task.output_row, slot);
        sum += std::exp(double(v));
        allowed = std::max(allowed, allowed_error(v, m, batch.vocab, Tolerance{}));
      }
      if (!(std::fabs(sum - 1) <= allowed))
        RC_FAIL(std::string(backend->name()) + ": output row " + std::to_string(task.output_row) +
                ": exponentials of the top values sum to " + std::to_string(sum));
    }
  }
}

RC_GTEST_PROP(Properties, ARowsBitsDoNotDependOnTheRestOfTheBatch, ()) {
  const BatchData batch = *gen::batch();
  const int levels = draw_levels(batch);
  const std::vector<RowTask> tasks = plan_rows(batch.view());
  RC_PRE(!tasks.empty());
  // A few rows per case: each costs a run of its own.
  std::vector<RowTask> picked;
  for (int i = 0; i < 3; ++i) picked.push_back(tasks[*rc::gen::inRange<std::size_t>(0, tasks.size())]);
  for (const Backend* backend : available_backends()) {
    const ResultData whole = run_backend(*backend, batch, levels);
    for (const RowTask& task : picked) {
      const ResultData single =
          run_backend(*backend, single_row_batch(batch.view().logit_row(task.logit_row), task.token), levels);
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
  const int levels = draw_levels(batch);
  for (const Backend* backend : available_backends()) {
    const auto run = [&] { return run_backend(*backend, batch, levels); };
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
