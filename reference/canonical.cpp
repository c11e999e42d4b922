// The `canonical` backend: SPEC §8's canonical arithmetic (logprobs/canonical_arithmetic.hpp)
// run entry by entry, with every optional part. Plain and slow on purpose: it is the definition
// the optimized backends that claim §8 are held to, bit for bit.
#include <algorithm>
#include <limits>
#include <vector>

#include "logprobs/canonical_arithmetic.hpp"
#include "row_backend.hpp"

namespace logprobs {
namespace {

void compute_row(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const LogprobsOutput& out) {
  const auto vocab = static_cast<std::uint32_t>(batch.vocab);
  std::vector<float> x(vocab);
  read_row(batch, task, x);
  std::uint32_t flags = 0;
  std::vector<canonical::Partial> parts(canonical::segment_count(vocab));
  const canonical::Partial row = canonical::row_partial(x.data(), vocab, flags, parts.data());  // sets flags
  const double n = canonical::normalizer(row, flags);

  // The K largest candidates under (value descending, token ascending), in token order.
  std::vector<std::uint32_t> top;
  for (std::uint32_t j = 0; j < vocab; ++j)
    if (x[j] > -std::numeric_limits<float>::infinity()) top.push_back(j);  // not NaN, not -inf
  const auto kept = std::min<std::size_t>(k, top.size());
  std::partial_sort(top.begin(), top.begin() + std::ptrdiff_t(kept), top.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  top.resize(kept);
  std::sort(top.begin(), top.end());

  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  for (std::uint32_t slot = 0; slot < k; ++slot) {
    const bool padding = slot >= top.size();
    tokens[slot] = padding ? vocab : top[slot];
    values[slot] = canonical::output_value(padding ? -std::numeric_limits<float>::infinity() : x[top[slot]], n);
  }
  tokens[k] = task.token;
  values[k] = canonical::output_value(x[task.token], n);
  if (out.ranks) {
    const float xs = x[task.token];
    out.lp_ranks[task.output_row] =
        static_cast<std::uint32_t>(std::count_if(x.begin(), x.end(), [xs](float v) { return v >= xs; }));
  }
}

}  // namespace

std::unique_ptr<Backend> make_canonical_backend() {
  return make_row_backend({.name = "canonical",
                           .description = "SPEC §8's canonical arithmetic entry by entry (the definition the "
                                          "backends that claim it are held to, bit for bit)",
                           .features = Features::all(),
                           .sums_in_one_chain = false,
                           .claims_canonical_arithmetic = true},
                          compute_row);
}

}  // namespace logprobs
