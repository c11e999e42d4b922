// `logprobs-check tolerance`: every term of SPEC §5's tolerance on one output row of a batch
// file, so that a user who sees a value violation can check what the judge allowed and why.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "commands.hpp"
#include "harness/batch_file.hpp"
#include "harness/sum_calibration.hpp"

namespace logprobs::cli {
namespace {

const RowTask& task_of(const std::vector<RowTask>& tasks, std::uint64_t output_row, const std::string& input) {
  if (output_row >= tasks.size())
    throw UsageError(fmt::format("--row {} is past the last output row of {} ({} output rows)", output_row, input,
                                 tasks.size()));
  return tasks[output_row];
}

void print_calibration(std::span<const float> x, double row_max, const Tolerance& tolerance, const RowTolerance& row) {
  if (tolerance.sum_rule != SumRule::calibrated) {
    const double v = double(x.size());
    fmt::print("  sum_err = {} = {:.3g}\n",
               tolerance.sum_rule == SumRule::linear ? fmt::format("V x 2^-24 = {:g} x 2^-24", v)
                                                     : fmt::format("sigma x sqrt(V) x 2^-24 = {:g} x {:.6g} x 2^-24",
                                                                   tolerance.sigma, std::sqrt(v)),
               row.sum_err);
    return;
  }
  const bool any_finite = std::any_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
  if (!any_finite || std::any_of(x.begin(), x.end(), [](float v) { return std::isnan(v) || std::isinf(v) && v > 0; })) {
    fmt::print("  the row's normalizer is NaN (SPEC §3: a NaN, a +inf or no finite x): its values must be NaN, and "
               "no sum is calibrated\n");
    return;
  }
  const SumCalibration calibration = calibrate_sums(x, static_cast<float>(row_max));
  fmt::print("  log S = {:.17g} (S: the exact sum of exp(x_j - m), each rounded once to f32)\n",
             calibration.log_exact_sum);
  for (std::size_t i = 0; i < kCalibrationLanes.size(); ++i)
    fmt::print("  L = {:>4} lanes: |log S_L - log S| = {:.3g}{}\n", kCalibrationLanes[i], calibration.deviation[i],
               calibration.deviation[i] == row.dev ? "  (dev)" : "");
  fmt::print("  sum_err = max(sigma x dev, floor x 2^-24) = max({:g} x {:.3g}, {:g} x 2^-24 = {:.3g}) = {:.3g}\n",
             tolerance.sigma, row.dev, tolerance.floor, std::ldexp(tolerance.floor, -24), row.sum_err);
}

}  // namespace

int tolerance_command(const FileArgs& args, std::uint64_t output_row) {
  MemoryBudget budget(args.memory_budget);
  const BatchFile file = read_batch_file(args.input, &budget);
  const RaggedBatch batch = file.batch.view();
  validate_batch(batch, 0);
  const std::vector<RowTask> tasks = plan_rows(batch);
  const RowTask& task = task_of(tasks, output_row, args.input);
  budget.charge(batch.vocab * sizeof(float), fmt::format("{}: one row of x", args.input));
  std::vector<float> x(batch.vocab);
  read_row(batch, task, x);

  const RowTolerance row = row_tolerance(x, args.tolerance);
  const RowShape shape = row_shape(x);
  const double m = largest_finite_logit(x);
  fmt::print("{}, output row {}: batch {}, logit row {}, evaluated token {}{}\n", args.input, output_row,
             task.batch_item, task.logit_row, task.token,
             batch.has_temperatures() ? fmt::format(", temperature {}", (*batch.temperatures)[task.batch_item]) : "");
  fmt::print("  V = {}, m = {} (the largest finite x), a {} row: the largest x has probability {:.3g}, {} masked (-inf)\n", batch.vocab, m,
             shape.kind(), shape.top_probability, shape.masked);
  fmt::print("  |v - ref| <= ulps x ulp(ref) + norm_ulps x ulp(|m| + log V) + sum_err, by the {} sum rule\n",
             sum_rule_name(row.sum_rule));
  print_calibration(x, m, args.tolerance, row);
  const double log_v = std::log(double(batch.vocab));
  fmt::print("  norm_ulps x ulp(|m| + log V) = {:g} x ulp({:.6g}) = {:.3g}\n", args.tolerance.norm_ulps,
             std::fabs(m) + log_v, row.normalizer_term);
  const float want = run_backend(reference_backend(), row_alone(file.batch, task), 0).value(0, 0);
  if (std::isfinite(want))
    fmt::print("  at the evaluated token's value {:.9g}: ulps x ulp(ref) = {:g} x {:.3g}, allowed {:.3g}\n", want,
               args.tolerance.ulps, ulp_f32(want), row.allowed(want));
  else
    fmt::print("  the evaluated token's value is {}: only the same value agrees (SPEC §5)\n", want);
  return kAgree;
}

}  // namespace logprobs::cli
