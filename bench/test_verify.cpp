// check_outputs, the --verify of logprobs-bench, accepts a backend's answer and rejects each kind
// of wrong one, so that the smoke test passing means something.
#include <gtest/gtest.h>

#include "bench_data.hpp"
#include "harness/judge.hpp"
#include "logprobs/backend.hpp"
#include "verify.hpp"

namespace logprobs::bench {
namespace {

class CheckOutputs : public ::testing::TestWithParam<Distribution> {
 protected:
  const BatchData& batch = batch_for({4, 1000, GetParam()});
  const Backend& max = *find_backend("max");
};

TEST_P(CheckOutputs, AcceptsTheMaxPort) {
  for (int levels : {0, 1, 3, 10, 16}) {
    const std::uint32_t k = top_k(levels);
    EXPECT_EQ(check_outputs(batch, k, run_backend(max, batch, k), tolerance_for(max, {})), "") << "levels " << levels;
  }
}

TEST_P(CheckOutputs, RejectsAWrongSampledSlot) {
  ResultData out = run_backend(max, batch, 7);
  out.lp_logits[2 * out.width + 7] += 1e-2f;
  EXPECT_NE(check_outputs(batch, 7, out).find("output row 2, slot 7"), std::string::npos);
}

TEST_P(CheckOutputs, RejectsATokenThatIsNotInTheTopK) {
  ResultData out = run_backend(max, batch, 7);
  std::uint32_t& token = out.lp_tokens[1 * out.width + 0];
  const float* x = batch.logits.data() + 1 * batch.row_stride;
  // Replace a top token by the row's smallest entry, keeping the value consistent with it.
  std::uint32_t smallest = 0;
  for (std::uint32_t j = 0; j < batch.vocab; ++j) smallest = x[j] < x[smallest] ? j : smallest;
  out.lp_logits[1 * out.width + 0] += x[smallest] - x[token];
  token = smallest;
  EXPECT_NE(check_outputs(batch, 7, out).find("output row 1, slot 0: top token"), std::string::npos);
}

TEST_P(CheckOutputs, RejectsADuplicateOrMissingToken) {
  ResultData dup = run_backend(max, batch, 7);
  dup.lp_tokens[1] = dup.lp_tokens[0];
  dup.lp_logits[1] = dup.lp_logits[0];
  EXPECT_NE(check_outputs(batch, 7, dup).find("output row 0, slot 1"), std::string::npos);

  ResultData padded = run_backend(max, batch, 7);
  padded.lp_tokens[0] = static_cast<std::uint32_t>(batch.vocab);  // padding where a token belongs
  EXPECT_NE(check_outputs(batch, 7, padded).find("padding count got 1 want 0"), std::string::npos);
}

TEST_P(CheckOutputs, RejectsAWrongTopValue) {
  ResultData out = run_backend(max, batch, 255);
  out.lp_logits[3 * out.width + 100] -= 1e-2f;
  EXPECT_NE(check_outputs(batch, 255, out).find("output row 3, slot 100"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Dists, CheckOutputs, ::testing::Values(Distribution::normal, Distribution::ascending, Distribution::zipf),
                         [](const auto& info) { return std::string(distribution_name(info.param)); });

}  // namespace
}  // namespace logprobs::bench
