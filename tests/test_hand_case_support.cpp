// The hand cases' judge itself (expected_result through the comparator, value_close): it must
// accept every answer the contract allows and reject what it rejects, or the hand cases prove
// nothing.
#include <cmath>
#include <cstdint>
#include <vector>

#include "hand_case_support.hpp"

namespace logprobs::hand {
namespace {

// A hand-made result for the tie row {1, 3, 2, 2, 2, 0} at K = 3, sampled token 5.
struct TieRow {
  std::vector<float> x = {1, 3, 2, 2, 2, 0};
  double n = -(3.0 + std::log(std::exp(-2.0) + 1.0 + 3 * std::exp(-1.0) + std::exp(-3.0)));
  ResultData result{1, 4};
  void set(std::uint32_t slot, std::uint32_t token, double value) {
    result.lp_tokens[slot] = token;
    result.lp_logits[slot] = static_cast<float>(value);
  }
  TieRow(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
    for (std::uint32_t slot = 0; slot < 3; ++slot) {
      const std::uint32_t t = slot == 0 ? a : slot == 1 ? b : c;
      set(slot, t, t < x.size() ? x[t] + n : -double(kInf));
    }
    set(3, 5, x[5] + n);
  }
  ::testing::AssertionResult judged() const { return matches_by_hand(single_row(x, 5), 3, result); }
};

TEST(MatchesByHand, AcceptsAnyTieBreakAndAnySlotOrder) {
  EXPECT_TRUE(TieRow(1, 2, 3).judged());
  EXPECT_TRUE(TieRow(4, 1, 3).judged());
  EXPECT_TRUE(TieRow(2, 4, 1).judged());
}

TEST(MatchesByHand, RejectsWrongTokensPaddingAndValues) {
  EXPECT_FALSE(TieRow(1, 2, 0).judged()) << "token 0 (logit 1) is not among the top 3";
  EXPECT_FALSE(TieRow(2, 3, 4).judged()) << "token 1 (the maximum) is missing";
  EXPECT_FALSE(TieRow(1, 2, 2).judged()) << "a repeated token";
  EXPECT_FALSE(TieRow(1, 2, 6).judged()) << "padding where a candidate exists";
  EXPECT_FALSE(TieRow(1, 2, 7).judged()) << "a token above V";

  TieRow off_value(1, 2, 3);
  off_value.set(1, 2, 2.0 + off_value.n + 1e-3);
  EXPECT_FALSE(off_value.judged());

  TieRow wrong_last(1, 2, 3);
  wrong_last.set(3, 0, 1.0 + wrong_last.n);
  EXPECT_FALSE(wrong_last.judged());

  TieRow nan_value(1, 2, 3);
  nan_value.set(0, 1, std::nan(""));
  EXPECT_FALSE(nan_value.judged());
}

TEST(ValueClose, FollowsTheSpecTolerance) {
  const std::vector<float> max_one = {1.0f}, max_ten = {10.0f, 0.0f};
  EXPECT_TRUE(value_close(kNaN, std::nan(""), max_one));
  EXPECT_FALSE(value_close(0.0f, std::nan(""), max_one));
  EXPECT_TRUE(value_close(-kInf, -double(kInf), max_one));
  EXPECT_FALSE(value_close(kInf, -double(kInf), max_one));
  EXPECT_FALSE(value_close(-3.0f, -double(kInf), max_one));
  // 4 ulp(1) + 4 ulp(|m| + log V = 1) + 2 sqrt(1) 2^-24 = 1.07e-6
  EXPECT_TRUE(value_close(-1.0f + 1e-6f, -1.0, max_one));
  EXPECT_FALSE(value_close(-1.0f + 2e-6f, -1.0, max_one));
  EXPECT_TRUE(value_close(-1.0f + 2e-6f, -1.0, max_ten)) << "the normalizer's term scales with |m| + log V";
}

}  // namespace
}  // namespace logprobs::hand
