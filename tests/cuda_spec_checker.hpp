// A small SPEC §5 judge for the CUDA backend's tests, independent of the harness's comparator:
// one output row against its input row, with the reference values computed here in double.
// Returns an empty string when the row agrees, else what is wrong.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace logprobs::spec_check {

inline double ulp_of(float v) {
  const float a = std::fabs(v);
  return double(std::nextafter(a, std::numeric_limits<float>::infinity()) - a);
}

// n = -(m + log S) in double, NaN for the SPEC §3 rows.
inline double reference_normalizer(const float* x, std::uint64_t vocab, double* max_out) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::uint64_t j = 0; j < vocab; ++j) {
    if (std::isnan(x[j])) {
      *max_out = 0;
      return std::numeric_limits<double>::quiet_NaN();
    }
    m = std::max(m, double(x[j]));
  }
  *max_out = m;
  double sum = 0;
  for (std::uint64_t j = 0; j < vocab; ++j) sum += std::exp(double(x[j]) - m);
  return -(m + std::log(sum));
}

inline std::string check_value(float got, double exact, double m, const char* what, std::uint32_t token) {
  const float want = float(exact);
  std::ostringstream out;
  if (std::isnan(want) || std::isnan(got)) {
    if (std::isnan(want) && std::isnan(got)) return {};
    out << what << " token " << token << ": got " << got << " want " << want;
    return out.str();
  }
  if (std::isinf(want) || std::isinf(got)) {
    if (got == want) return {};
    out << what << " token " << token << ": got " << got << " want " << want;
    return out.str();
  }
  const double tol = 1e-5 * std::max(1.0, std::fabs(m)) + 4 * ulp_of(want);
  if (std::fabs(double(got) - double(want)) <= tol) return {};
  out.precision(9);
  out << what << " token " << token << ": got " << got << " want " << want << " (off by "
      << std::fabs(double(got) - double(want)) << " > " << tol << ")";
  return out.str();
}

// One output row: values/tokens hold W = K + 1 slots.
inline std::string check_row(const float* x, std::uint64_t vocab, std::uint32_t token, std::uint32_t k,
                             const float* values, const std::uint32_t* tokens) {
  double m = 0;
  const double n = reference_normalizer(x, vocab, &m);
  std::ostringstream out;
  if (tokens[k] != token) {
    out << "last slot token " << tokens[k] << ", want " << token;
    return out.str();
  }
  if (auto e = check_value(values[k], double(x[token]) + n, m, "last slot", token); !e.empty()) return e;

  std::vector<float> candidates;
  for (std::uint64_t j = 0; j < vocab; ++j)
    if (x[j] > -std::numeric_limits<float>::infinity()) candidates.push_back(x[j]);
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  const std::uint64_t kept = std::min<std::uint64_t>(k, candidates.size());
  candidates.resize(kept);

  std::vector<float> got;
  std::vector<std::uint32_t> seen;
  std::uint64_t padding = 0;
  for (std::uint32_t slot = 0; slot < k; ++slot) {
    const std::uint32_t t = tokens[slot];
    if (t == vocab) {
      ++padding;
      if (auto e = check_value(values[slot], -std::numeric_limits<double>::infinity() + n, m, "padding", t);
          !e.empty())
        return e;
      continue;
    }
    if (t > vocab) {
      out << "slot " << slot << ": token " << t << " is above V " << vocab;
      return out.str();
    }
    seen.push_back(t);
    got.push_back(x[t]);
    if (auto e = check_value(values[slot], double(x[t]) + n, m, "top slot", t); !e.empty()) return e;
  }
  if (padding != k - kept) {
    out << padding << " padding slots, want " << (k - kept);
    return out.str();
  }
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) return "a top token repeats";
  std::sort(got.begin(), got.end(), std::greater<>());
  if (!std::equal(got.begin(), got.end(), candidates.begin(), candidates.end(),
                  [](float a, float b) { return a == b; }))
    return "the top tokens' logits are not the K largest candidates";
  return {};
}

}  // namespace logprobs::spec_check
