#include "fuzz/hand_cases.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "harness/half_precision.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using Row = std::vector<float>;

// The echo shape: each batch item b has one logit row, one output row and one token per
// position (logit, token and output offsets all equal). rows[b] are b's logit rows; item b's
// tokens are tokens[b]; sampled[b] is its sampled token.
BatchData echo(std::uint64_t vocab, const std::vector<std::vector<Row>>& rows,
               const std::vector<std::vector<std::uint32_t>>& tokens, const std::vector<std::uint32_t>& sampled) {
  BatchData b;
  b.vocab = b.row_stride = vocab;
  b.sampled_tokens = sampled;
  b.logit_row_offsets = {0};
  for (std::size_t item = 0; item < rows.size(); ++item) {
    for (const Row& row : rows[item]) b.logits.insert(b.logits.end(), row.begin(), row.end());
    b.tokens.insert(b.tokens.end(), tokens[item].begin(), tokens[item].end());
    b.logit_row_offsets.push_back(static_cast<std::uint32_t>(b.logit_row_offsets.back() + rows[item].size()));
  }
  b.rows = b.logit_row_offsets.back();
  b.token_row_offsets = b.lp_output_offsets = b.logit_row_offsets;
  return b;
}

// The no-echo shape: one logit row and one output row per batch item, no tokens.
BatchData no_echo(std::uint64_t vocab, const std::vector<Row>& rows, const std::vector<std::uint32_t>& sampled) {
  std::vector<std::vector<Row>> per_item;
  std::vector<std::vector<std::uint32_t>> no_tokens(rows.size());
  for (const Row& row : rows) per_item.push_back({row});
  BatchData b = echo(vocab, per_item, no_tokens, sampled);
  b.token_row_offsets.assign(rows.size() + 1, 0);
  return b;
}

// Two distinct f32 values just above 1.5 whose quotients by 3 round to the same f32 (the
// quotients' spacing, 2^-23 / 3, is below their ulp, 2^-24): distinct x, equal x / T.
std::pair<float, float> equal_after_division_by_3() {
  const float a = std::nextafter(1.5f, 2.0f), b = std::nextafter(a, 2.0f);
  if (!(a / 3.0f == b / 3.0f)) throw std::logic_error("hand case: the quotients by 3 differ");
  return {a, b};
}

Row iota_row(std::uint64_t vocab, float start, float step) {
  Row row(vocab);
  for (std::uint64_t j = 0; j < vocab; ++j) row[j] = start + step * static_cast<float>(j);
  return row;
}

}  // namespace

std::vector<HandCase> hand_cases() {
  std::vector<HandCase> cases;
  const auto add = [&](std::string name, BatchData batch) { cases.push_back({std::move(name), std::move(batch)}); };

  add("no-echo, distinct finite values",
      no_echo(6, {{0.5f, -1.f, 2.f, 1.5f, -3.f, 0.f}, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}}, {2, 0}));
  add("echo, two items of 3 and 2 positions",
      echo(5,
           {{{0.f, 1.f, 2.f, 3.f, 4.f}, {4.f, 3.f, 2.f, 1.f, 0.f}, {1.f, -1.f, 1.f, -1.f, 1.f}},
            {{-2.f, 0.f, 2.f, 0.f, -2.f}, {3.f, 3.f, 1.f, 2.f, 0.f}}},
           {{1, 4, 0}, {3, 2}}, {2, 1}));
  add("ties: constant row and repeated values",
      no_echo(8, {Row(8, 0.25f), {1.f, 1.f, 2.f, 2.f, 2.f, 0.f, 1.f, 0.f}}, {7, 3}));
  add("padding: V = 3, fewer candidates than K", no_echo(3, {{-1.f, 0.f, 1.f}}, {1}));
  add("V = 1", no_echo(1, {{0.75f}, {-2.f}}, {0, 0}));
  add("masked -inf entries, evaluated token masked",
      no_echo(6, {{-kInf, 1.f, -kInf, 0.f, -kInf, 2.f}, {-kInf, -kInf, -kInf, -kInf, -kInf, 3.f}}, {0, 5}));
  add("NaN in a row", no_echo(5, {{0.f, kNaN, 1.f, 2.f, -1.f}, {0.f, 1.f, 2.f, 3.f, 4.f}}, {3, 1}));
  add("+inf in a row", no_echo(5, {{0.f, kInf, 1.f, kInf, -kInf}, {0.f, 1.f, 2.f, 3.f, 4.f}}, {2, 4}));
  add("only -inf row", no_echo(4, {Row(4, -kInf), {1.f, 2.f, -kInf, 0.f}}, {1, 2}));
  add("large magnitudes (±1e4)", no_echo(64, {iota_row(64, -1e4f, 317.5f), iota_row(64, 1e4f, -300.25f)}, {63, 0}));
  add("ascending row, V = 300 (heap worst case)", no_echo(300, {iota_row(300, -3.f, 0.02f)}, {150}));
  add("descending row, V = 300", no_echo(300, {iota_row(300, 3.f, -0.02f)}, {299}));

  // Empty batch items: item 1 owns logit rows and tokens but no output rows; item 3 owns
  // nothing at all; items 0 and 2 each read only their last logit row.
  {
    BatchData b;
    b.vocab = b.row_stride = 4;
    b.rows = 5;
    b.logits = {0.f, 1.f, 2.f, 3.f, 9.f, 9.f, 9.f, 9.f, 3.f, 2.f, 1.f, 0.f, -1.f, 0.f, 1.f, 0.f, 2.f, 2.f, 1.f, 1.f};
    b.tokens = {3, 1, 2};
    b.sampled_tokens = {1, 0, 3, 2};
    b.logit_row_offsets = {0, 1, 4, 5, 5};
    b.token_row_offsets = {0, 1, 3, 3, 3};
    b.lp_output_offsets = {0, 1, 1, 2, 2};
    add("empty batch items, unread logit rows and spare tokens", std::move(b));
  }
  {
    BatchData b;
    b.vocab = b.row_stride = 10;
    b.logit_row_offsets = b.token_row_offsets = b.lp_output_offsets = {0};
    add("B = 0", std::move(b));
  }
  // Arbitrary offsets with a row stride above V: the entries past V must never be read (NaN).
  {
    BatchData b;
    b.vocab = 3;
    b.row_stride = 5;
    b.rows = 3;
    b.logits = {kNaN, kNaN, kNaN, kNaN, kNaN, 0.f, 2.f, 1.f, kNaN, kNaN, -1.f, 5.f, 5.f, kNaN, kNaN};
    b.tokens = {0, 2, 1};
    b.sampled_tokens = {0};
    b.logit_row_offsets = {0, 3};
    b.token_row_offsets = {0, 3};
    b.lp_output_offsets = {0, 2};
    add("row stride > V, an unread leading row, fewer output rows than logit rows", std::move(b));
  }

  // Contract v2 (SPEC §2.5, §2.9, §6).
  add("bf16 logits: ties from rounding, a NaN payload, infinities",
      with_dtype(no_echo(6,
                         {{1.0f, 1.001f, 1.002f, -2.5f, 0.0f, 3.0f},
                          {0.5f, -kInf, 0.25f, 2.0f, kNaN, 1.0f},
                          {-kInf, -kInf, 4.0f, -kInf, -kInf, -kInf}},
                         {1, 3, 2}),
                 LogitsDtype::bf16));
  add("f16 logits: subnormals, the largest f16, a NaN payload",
      with_dtype(no_echo(5, {{6e-8f, 1e-5f, 0.0f, -6e-5f, 65504.0f}, {1.0f, kNaN, 2.0f, 3.0f, -1.0f}}, {0, 2}),
                 LogitsDtype::f16));
  {
    const auto [a, b] = equal_after_division_by_3();
    BatchData t = no_echo(5, {{b, 0.5f, a, -1.0f, 1.0f}, {2.0f, -4.0f, 0.0f, 1.0f, -kInf}}, {2, 1});
    t.temperatures = std::vector<float>{3.0f, 0.05f};
    add("temperatures: distinct x with equal x / T, and a sharp T = 0.05", std::move(t));
  }
  {
    BatchData t = echo(4, {{{0.5f, -1.0f, 2.0f, 0.25f}, {1.0f, 1.0f, -kInf, 3.0f}}}, {{3, 0}}, {1});
    t.temperatures = std::vector<float>{1.0f};
    add("temperature 1 (must change no bit)", std::move(t));
  }
  add("ranks: x_s tied, x_s = -inf, x_s = NaN", no_echo(6,
                                                        {{2.0f, 1.0f, 2.0f, 2.0f, -kInf, 0.0f},
                                                         {1.0f, -kInf, kNaN, 0.0f, -kInf, 2.0f},
                                                         {1.0f, 0.5f, kNaN, 0.0f, 3.0f, 2.0f}},
                                                        {3, 1, 2}));
  add("the evaluated token among the top slots (greedy-exact)",
      no_echo(7, {{0.1f, 4.0f, -2.0f, 3.5f, 1.0f, 0.0f, 2.0f}, {1.0f, 1.0f, 1.0f, 0.0f, -1.0f, 5.0f, 1.0f}}, {1, 5}));
  return cases;
}

}  // namespace logprobs
