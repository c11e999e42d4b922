#include "verify.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <vector>

#include "logprobs/batch.hpp"

namespace logprobs::bench {

namespace {

// Loose on purpose: the comparator checks ULPs; this catches wrong formulas, tokens and slots.
bool close(double got, double want, double row_max) {
  return std::abs(got - want) <= 1e-4 * std::max(1.0, std::abs(row_max));
}

}  // namespace

std::string check_outputs(const BatchData& batch, int levels, const ResultData& out) {
  const std::uint64_t k = top_k(levels);
  std::ostringstream err;
  for (std::uint64_t r = 0; r < batch.rows; ++r) {
    const float* x = batch.logits.data() + r * batch.row_stride;
    const double m = *std::max_element(x, x + batch.vocab);
    double sum = 0;
    for (std::uint64_t j = 0; j < batch.vocab; ++j) sum += std::exp(double(x[j]) - m);
    const double n = -(m + std::log(sum));

    const std::uint32_t s = batch.sampled_tokens[r];
    if (out.token(r, k) != s || !close(out.value(r, k), x[s] + n, m)) {
      err << "row " << r << " last slot: got (" << out.token(r, k) << ", " << out.value(r, k) << "), want (" << s
          << ", " << x[s] + n << ")";
      return err.str();
    }

    const std::uint64_t real = std::min<std::uint64_t>(k, batch.vocab);
    std::vector<float> reported;
    std::vector<std::uint32_t> tokens;
    for (std::uint64_t slot = 0; slot < k; ++slot) {
      const std::uint32_t t = out.token(r, slot);
      if (t == batch.vocab) continue;  // padding
      if (t > batch.vocab || !close(out.value(r, slot), x[t] + n, m)) {
        err << "row " << r << " slot " << slot << ": (" << t << ", " << out.value(r, slot) << ") is not a token "
            << "with its log-probability";
        return err.str();
      }
      reported.push_back(x[t]);
      tokens.push_back(t);
    }
    std::sort(tokens.begin(), tokens.end());
    if (reported.size() != real || std::adjacent_find(tokens.begin(), tokens.end()) != tokens.end()) {
      err << "row " << r << ": " << reported.size() << " top tokens"
          << (reported.size() == real ? " with repeats" : "") << ", want " << real << " distinct";
      return err.str();
    }
    std::vector<float> best(x, x + batch.vocab);
    std::partial_sort(best.begin(), best.begin() + real, best.end(), std::greater<>());
    best.resize(real);
    std::sort(reported.begin(), reported.end(), std::greater<>());
    if (reported != best) {
      err << "row " << r << ": the top tokens' logits are not the " << real << " largest";
      return err.str();
    }
  }
  return {};
}

}  // namespace logprobs::bench
