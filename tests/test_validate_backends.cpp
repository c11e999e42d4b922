// SPEC §4 beyond the rules of one batch: a backend refuses each optional part it lacks before it
// reads anything, every registered backend validates before it reads or writes memory, and when
// several rules break the first in the SPEC's list is reported. Part of test_validate.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "harness/half_precision.hpp"
#include "validation_support.hpp"

namespace logprobs::validation {
namespace {

// ---- optional parts: a backend refuses what it lacks, before it reads anything ------------------

TEST(Validate, ABackendRefusesEachPartItLacksWithoutComputing) {
  struct Case {
    const char* part;
    Features lacking;
    std::function<void(BatchData&)> needs;
    std::uint32_t k = kK;
    bool ranks = false;
  };
  const Features all = Features::all();
  const std::vector<Case> cases = {
      {"bf16 logits",
       {.bf16_logits = false, .f16_logits = true, .temperatures = true, .ranks = true, .any_k = true},
       [](BatchData& b) { b = with_dtype(b, LogitsDtype::bf16); }},
      {"f16 logits",
       {.bf16_logits = true, .f16_logits = false, .temperatures = true, .ranks = true, .any_k = true},
       [](BatchData& b) { b = with_dtype(b, LogitsDtype::f16); }},
      {"temperatures",
       {.bf16_logits = true, .f16_logits = true, .temperatures = false, .ranks = true, .any_k = true},
       [](BatchData& b) {
         b.temperatures = std::vector<float>{1.0f, 1.0f, 1.0f};
       }},
      {"ranks",
       {.bf16_logits = true, .f16_logits = true, .temperatures = true, .ranks = false, .any_k = true},
       [](BatchData&) {},
       kK,
       true},
      {"K = 5 (not of the form 2^L - 1)",
       {.bf16_logits = true, .f16_logits = true, .temperatures = true, .ranks = true, .any_k = false},
       [](BatchData&) {},
       5},
  };
  for (const Case& c : cases) {
    BatchData batch = valid_batch();
    c.needs(batch);
    ResultData out(5, slots_per_row(c.k), c.ranks);
    const SpyBackend lacking(c.lacking), complete(all);
    try {
      lacking.run(batch.view(), c.k, out.view());
      ADD_FAILURE() << c.part << ": accepted";
    } catch (const UnsupportedPart& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("does not implement ") + c.part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("a valid batch"), std::string::npos) << e.what();
    }
    EXPECT_EQ(lacking.compute_calls, 0) << c.part;
    complete.run(batch.view(), c.k, out.view());
    EXPECT_EQ(complete.compute_calls, 1) << c.part;
  }
}

// ---- every registered backend: run() validates before it reads memory --------------------------

TEST(Validate, NoBackendReadsTheLogitsOfAnInvalidBatch) {
  const BatchData owner = valid_batch();
  RaggedBatch batch = owner.view();
  batch.logits = nullptr;  // any read crashes
  batch.rows = 0;          // so the fault is logit_row_offsets[3] = 7 > 0 rows, not the null pointer
  ResultData out = outputs_for(batch, kK);
  for (const Backend* backend : all_backends()) {
    SCOPED_TRACE(std::string(backend->name()));
    EXPECT_THROW(backend->run(batch, kK, out.view()), InvalidBatch);
  }
}

TEST(Validate, NoBackendWritesOutputsOfAnInvalidBatch) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[2] = 4;
  for (const Backend* backend : all_backends()) {
    SCOPED_TRACE(std::string(backend->name()));
    ResultData out = outputs_for(batch.view(), kK);
    const ResultData untouched = out;
    EXPECT_THROW(backend->run(batch.view(), kK, out.view()), InvalidBatch);
    EXPECT_TRUE(same_bits(out, untouched));
  }
}

// SPEC §4: "When several rules break, the first in this list is reported."
TEST(Validate, TheFirstBrokenRuleInTheSpecsOrderIsReported) {
  BatchData batch = valid_batch();
  batch.sampled_tokens[2] = 4;                       // a token >= V (rule 6)
  batch.temperatures = std::vector<float>{1, 0, 1};  // a temperature of 0 (rule 7)
  EXPECT_TRUE(rejected(batch, kK, {"sampled_tokens[2] = 4"}));
  batch.lp_output_offsets = {0, 3, 2, 5};  // decreasing (rule 3)
  EXPECT_TRUE(rejected(batch, kK, {"lp_output_offsets decreases"}));
  batch.temperatures = std::vector<float>{1, 1};  // of length 2 (rule 2)
  EXPECT_TRUE(rejected(batch, kK, {"temperatures: length 2"}));
  batch.row_stride = 3;  // below V (rule 1)
  EXPECT_TRUE(rejected(batch, kK, {"row_stride: 3"}));
}

}  // namespace
}  // namespace logprobs::validation
