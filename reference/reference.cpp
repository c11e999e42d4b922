// The reference backend: SPEC §2 and §3 written out plainly, in double precision, with every
// optional part of the contract (16-bit logits, temperatures, any K, ranks).
//
// x is the row as SPEC §2.5 defines it (read_row: widened to f32, divided by the temperature in
// f32). m, S and the normalizer n are computed in double and each output value is rounded once
// to f32, so the harness measures every other backend's error against a near-exact answer.
// Top slots come in descending value, ascending token order.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "row_backend.hpp"

namespace logprobs {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// n = -(m + log S) with IEEE semantics: NaN when the row holds a NaN or a +inf, or only -inf.
double normalizer(const Eigen::ArrayXd& x) {
  if (x.hasNaN()) return kNaN;
  const double m = x.maxCoeff();
  const double sum = (x - m).exp().sum();  // inf - inf = NaN covers the +inf and only -inf rows
  return -(m + std::log(sum));
}

// The K candidates (finite or +inf, never NaN or -inf) with the largest logits.
std::vector<std::uint32_t> top_tokens(const Eigen::ArrayXd& x, std::uint32_t k) {
  std::vector<std::uint32_t> candidates;
  for (Eigen::Index j = 0; j < x.size(); ++j) {
    if (x[j] > -kInf) candidates.push_back(static_cast<std::uint32_t>(j));
  }
  const auto kept = std::min<std::size_t>(k, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + kept, candidates.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  candidates.resize(kept);
  return candidates;
}

// SPEC §2.9: how many x_j are >= x_s (a NaN compares false, so it is never counted, and a NaN
// x_s counts nothing).
std::uint32_t rank_of(const Eigen::ArrayXd& x, std::uint32_t s) {
  return static_cast<std::uint32_t>((x >= x[s]).count());
}

void compute_row(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const LogprobsOutput& out) {
  std::vector<float> row(batch.vocab);
  read_row(batch, task, row);
  const Eigen::ArrayXd x = Eigen::Map<const Eigen::ArrayXf>(row.data(), Eigen::Index(row.size())).cast<double>();
  const double n = normalizer(x);
  const auto vocab = static_cast<std::uint32_t>(batch.vocab);

  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  const std::vector<std::uint32_t> top = top_tokens(x, k);
  for (std::uint32_t slot = 0; slot < k; ++slot) {
    const bool padding = slot >= top.size();
    tokens[slot] = padding ? vocab : top[slot];
    values[slot] = static_cast<float>((padding ? -kInf : x[top[slot]]) + n);
  }
  tokens[k] = task.token;
  values[k] = static_cast<float>(x[task.token] + n);
  if (out.ranks) out.lp_ranks[task.output_row] = rank_of(x, task.token);
}

}  // namespace

std::unique_ptr<Backend> make_reference_backend() {
  return make_row_backend({.name = std::string(kReferenceName),
                           .description = "Eigen, double-precision normalizer, exact top-K by sorting, every "
                                          "optional part (the contract's answer)",
                           .features = Features::all()},
                          compute_row);
}

}  // namespace logprobs
