// The reference backend: SPEC §2 and §3 written out plainly, in double precision, with every
// optional part of the contract (16-bit logits, temperatures, any K, ranks).
//
// x is the row as SPEC §2.5 defines it (read_row: widened to f32, divided by the temperature in
// f32). m, S and the normalizer n are computed in double and each output value is rounded once
// to f32, so the harness measures every other backend's error against a near-exact answer.
// Top slots come in descending value, ascending token order.
//
// It is as fast as that allows without changing a bit: each thread reuses its buffers; S, where
// the time goes, is Eigen's vectorized exp built for the CPU's SIMD target in a fixed order
// (exp_sum.cpp); the K largest are kept in a heap of K while the row is read, so a row costs one
// comparison per entry that cannot enter, not a sort of every candidate.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exp_sum.hpp"
#include "row_backend.hpp"

namespace logprobs {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using RowMap = Eigen::Map<const Eigen::ArrayXf>;

// n = -(m + log S) with IEEE semantics: NaN when the row holds a NaN or a +inf, or only -inf
// (inf - inf in S). x is f32, so its max is exact; x_j - m is taken in double.
double normalizer(const RowMap& x) {
  bool has_nan = false;
  for (const float v : x) has_nan |= v != v;  // vectorized, where Eigen's hasNaN() stops at each entry
  if (has_nan) return kNaN;
  const double m = x.maxCoeff();
  const double n = -(m + std::log(sum_of_exponentials(x.data(), std::uint64_t(x.size()), m)));
  return std::isnan(n) ? kNaN : n;
}

// x + n in double, rounded once to f32. In a row whose n is NaN every value is the one quiet NaN:
// IEEE leaves it to the order of the operands which of two NaNs an addition returns (x may be a
// NaN of either sign), and that order is the compiler's.
float output_value(double x, double n) { return static_cast<float>(std::isnan(n) ? n : x + n); }

// The K candidates (finite or +inf, never NaN or -inf) with the largest logits, best first:
// `top` is a heap of the best K seen so far whose front is the worst of them. A block of entries
// none of which reaches that worst logit cannot enter and is passed over in one vectorized test.
void top_tokens(const RowMap& x, std::uint32_t k, std::vector<std::uint32_t>& top) {
  const auto before = [&](std::uint32_t a, std::uint32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  top.clear();
  if (k == 0) return;
  const auto vocab = std::uint32_t(x.size());
  constexpr std::uint32_t kBlock = 64;
  for (std::uint32_t begin = 0; begin < vocab; begin += kBlock) {
    const std::uint32_t end = std::min(begin + kBlock, vocab);
    if (top.size() == k) {
      const float worst = x[top.front()];
      bool reaches = false;
      for (std::uint32_t j = begin; j < end; ++j) reaches |= x[j] >= worst;  // false for NaN
      if (!reaches) continue;
    }
    for (std::uint32_t j = begin; j < end; ++j) {
      if (!(x[j] > -kInf)) continue;  // NaN or -inf
      if (top.size() < k) {
        top.push_back(j);
        std::push_heap(top.begin(), top.end(), before);
      } else if (before(j, top.front())) {
        std::pop_heap(top.begin(), top.end(), before);
        top.back() = j;
        std::push_heap(top.begin(), top.end(), before);
      }
    }
  }
  std::sort_heap(top.begin(), top.end(), before);
}

// SPEC §2.9: how many x_j are >= x_s (a NaN compares false, so it is never counted, and a NaN
// x_s counts nothing).
std::uint32_t rank_of(const RowMap& x, std::uint32_t s) { return static_cast<std::uint32_t>((x >= x[s]).count()); }

void compute_row(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const LogprobsOutput& out) {
  thread_local std::vector<float> row;
  thread_local std::vector<std::uint32_t> top;
  row.resize(batch.vocab);
  read_row(batch, task, row);
  const RowMap x(row.data(), Eigen::Index(row.size()));
  const double n = normalizer(x);
  const auto vocab = static_cast<std::uint32_t>(batch.vocab);

  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  top_tokens(x, k, top);
  for (std::uint32_t slot = 0; slot < k; ++slot) {
    const bool padding = slot >= top.size();
    tokens[slot] = padding ? vocab : top[slot];
    values[slot] = output_value(padding ? -kInf : x[top[slot]], n);
  }
  tokens[k] = task.token;
  values[k] = output_value(x[task.token], n);
  if (out.ranks) out.lp_ranks[task.output_row] = rank_of(x, task.token);
}

}  // namespace

std::unique_ptr<Backend> make_reference_backend() {
  return make_row_backend({.name = std::string(kReferenceName),
                           .description = "Eigen, double-precision normalizer, exact top-K by a heap of K, every "
                                          "optional part (the contract's answer)",
                           .features = Features::all()},
                          compute_row);
}

}  // namespace logprobs
