// validate_batch on arbitrary shapes, offsets, tokens, levels and output shapes. It may only
// return or throw InvalidBatch: libFuzzer reports any other exception, crash or sanitizer error.
// A batch it accepts must be safe to compute (SPEC §4: validation runs before any backend reads
// memory), so then every row plan_rows gives must lie inside the arrays, and, when the batch is
// small, every host backend runs on buffers of exactly the accepted sizes, where ASan sees any
// read or write outside them.
//
// Inputs are arbitrary fields, or batches at the edge of validity (valid, or with counts and
// tokens one past their limits) with a few fields then set to arbitrary values: bugs in
// validation live at that edge, which arbitrary fields seldom reach.
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstdio>
#include <cstdlib>

#include "harness/batch_data.hpp"
#include "harness/host_backends.hpp"

namespace logprobs::fuzz {
namespace {

constexpr std::uint64_t kMaxComputedElements = std::uint64_t{1} << 16;

void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz_validate: an accepted batch breaks: %s\n", what);
    std::abort();
  }
}

// Small numbers mostly, so that valid batches are common; any 64-bit value sometimes.
std::uint64_t number(FuzzedDataProvider& in, std::uint64_t small_max) {
  return in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>() : in.ConsumeIntegralInRange<std::uint64_t>(0, small_max);
}

std::uint32_t number32(FuzzedDataProvider& in, std::uint32_t small_max) {
  return in.ConsumeBool() ? in.ConsumeIntegral<std::uint32_t>() : in.ConsumeIntegralInRange<std::uint32_t>(0, small_max);
}

// What a RaggedBatch views, owned. logits_null stands for the logits pointer, which validation
// checks but never reads.
struct Fields {
  std::uint64_t rows = 0, vocab = 0, row_stride = 0;
  int levels = 0;
  bool logits_null = false;
  std::vector<std::uint32_t> tokens, sampled_tokens, logit_row_offsets, token_row_offsets, lp_output_offsets;

  RaggedBatch view(const float* logits) const {
    return {logits_null ? nullptr : logits, rows, vocab, row_stride, tokens, sampled_tokens, logit_row_offsets,
            token_row_offsets, lp_output_offsets};
  }
};

Fields arbitrary_fields(FuzzedDataProvider& in) {
  Fields f;
  const auto b_count = in.ConsumeIntegralInRange<std::size_t>(0, 8);
  const auto array = [&](std::size_t length) {
    std::vector<std::uint32_t> values(length);
    for (auto& v : values) v = number32(in, 40);
    return values;
  };
  const auto offsets = [&] { return array(in.ConsumeBool() ? b_count + 1 : in.ConsumeIntegralInRange<std::size_t>(0, 10)); };
  f.sampled_tokens = array(b_count);
  f.logit_row_offsets = offsets();
  f.token_row_offsets = offsets();
  f.lp_output_offsets = offsets();
  f.tokens = array(in.ConsumeIntegralInRange<std::size_t>(0, 24));
  f.rows = number(in, 24);
  f.vocab = number(in, 40);
  f.row_stride = in.ConsumeBool() ? f.vocab + number(in, 3) : number(in, 48);
  f.levels = in.ConsumeBool() ? in.ConsumeIntegral<int>() : in.ConsumeIntegralInRange(-2, 18);
  f.logits_null = in.ConsumeBool();
  return f;
}

// A valid batch (slack 0), or one whose every count and token is drawn from its valid range
// widened by one past the edge (slack 1), so that each rule is broken by one, alone or together.
Fields edge_fields(FuzzedDataProvider& in, std::uint32_t slack) {
  const auto draw = [&](std::uint32_t low, std::uint32_t high) {  // [low - slack, high + slack], at least 0
    return in.ConsumeIntegralInRange<std::uint32_t>(low >= slack ? low - slack : 0, high + slack);
  };
  Fields f;
  f.vocab = in.ConsumeIntegralInRange<std::uint64_t>(1, 40);
  f.row_stride = f.vocab - slack + in.ConsumeIntegralInRange<std::uint64_t>(0, 3 + slack);
  f.levels = in.ConsumeIntegralInRange(-static_cast<int>(slack), kMaxLevels + static_cast<int>(slack));
  const auto vocab = static_cast<std::uint32_t>(f.vocab);
  f.logit_row_offsets = f.token_row_offsets = f.lp_output_offsets = {0};
  const int items = in.ConsumeIntegralInRange(0, 6);
  for (int b = 0; b < items; ++b) {
    const std::uint32_t rows = draw(0, 4);
    const std::uint32_t outputs = draw(0, rows);
    const std::uint32_t tokens = outputs == 0 ? draw(0, 2) : draw(outputs - 1, outputs + 1);
    f.logit_row_offsets.push_back(f.logit_row_offsets.back() + rows);
    f.token_row_offsets.push_back(f.token_row_offsets.back() + tokens);
    f.lp_output_offsets.push_back(f.lp_output_offsets.back() + outputs);
    for (std::uint32_t t = 0; t < tokens; ++t) f.tokens.push_back(draw(0, vocab - 1));
    f.sampled_tokens.push_back(draw(0, vocab - 1));
  }
  f.rows = draw(f.logit_row_offsets.back(), f.logit_row_offsets.back() + 2);
  return f;
}

// Sets one field, or one entry of an array, to an arbitrary value, or changes an array's length.
void mutate(FuzzedDataProvider& in, Fields& f) {
  std::vector<std::uint32_t>* arrays[] = {&f.tokens, &f.sampled_tokens, &f.logit_row_offsets, &f.token_row_offsets,
                                          &f.lp_output_offsets};
  const int choice = in.ConsumeIntegralInRange(0, 9);
  switch (choice) {
    case 0: f.vocab = number(in, 48); return;
    case 1: f.row_stride = number(in, 48); return;
    case 2: f.rows = number(in, 32); return;
    case 3: f.levels = in.ConsumeBool() ? in.ConsumeIntegral<int>() : in.ConsumeIntegralInRange(-2, 18); return;
    case 4: f.logits_null = !f.logits_null; return;
    default: break;
  }
  std::vector<std::uint32_t>& array = *arrays[choice - 5];
  if (in.ConsumeBool()) {
    array.resize(in.ConsumeIntegralInRange<std::size_t>(0, array.size() + 1), number32(in, 48));
  } else if (!array.empty()) {
    array[in.ConsumeIntegralInRange<std::size_t>(0, array.size() - 1)] = number32(in, 48);
  }
}

// The output buffers: of the accepted shape, or of any small shape and sizes.
struct Outputs {
  std::vector<float> lp_logits;
  std::vector<std::uint32_t> lp_tokens;
  LogprobsOutput view;
};

Outputs outputs(FuzzedDataProvider& in, const OutputShape& shape) {
  Outputs out;
  const bool exact = !in.ConsumeBool() && shape.rows * shape.width <= kMaxComputedElements;
  const std::uint64_t rows = exact ? shape.rows : number(in, 8);
  const std::uint64_t width = exact ? shape.width : number(in, 8);
  out.lp_logits.resize(exact ? rows * width : in.ConsumeIntegralInRange<std::size_t>(0, 64));
  out.lp_tokens.resize(exact || in.ConsumeBool() ? out.lp_logits.size() : in.ConsumeIntegralInRange<std::size_t>(0, 64));
  out.view = {out.lp_logits, out.lp_tokens, rows, width};
  return out;
}

void fuzz_one(FuzzedDataProvider& in) {
  static const float unread_logit = 0;
  Fields fields;
  if (in.ConsumeIntegralInRange(0, 3) == 0) {
    fields = arbitrary_fields(in);
  } else {
    fields = edge_fields(in, in.ConsumeBool() ? 1 : 0);
    for (int m = in.ConsumeIntegralInRange(0, 3); m > 0; --m) mutate(in, fields);
  }
  RaggedBatch batch = fields.view(&unread_logit);
  const int levels = fields.levels;

  OutputShape shape;
  try {
    shape = validate_batch(batch, levels);
  } catch (const InvalidBatch&) {
    return;
  }
  require(shape.width == slots_per_row(levels), "W = 2^levels");
  for (const RowTask& task : plan_rows(batch)) {
    require(task.output_row < shape.rows, "output row < N");
    require(task.logit_row < batch.rows, "logit row < rows");
    require(task.token < batch.vocab, "evaluated token < V");
  }

  Outputs out = outputs(in, shape);
  try {
    validate_batch(batch, levels, out.view);
  } catch (const InvalidBatch&) {
    return;
  }
  require(out.view.rows == shape.rows && out.view.width == shape.width, "output shape [N, W]");
  require(out.lp_logits.size() == shape.rows * shape.width && out.lp_tokens.size() == out.lp_logits.size(),
          "output sizes N * W");

  // Compute on logits of exactly rows * row_stride elements (row_stride >= V >= 1 here).
  if (batch.rows > kMaxComputedElements / batch.row_stride) return;
  std::vector<float> logits(batch.rows * batch.row_stride);
  for (float& x : logits) x = in.remaining_bytes() >= 4 ? std::bit_cast<float>(in.ConsumeIntegral<std::uint32_t>()) : 1.0f;
  batch.logits = logits.data();
  for (const Backend* backend : available_host_backends()) backend->run(batch, levels, out.view);
}

}  // namespace
}  // namespace logprobs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  logprobs::fuzz::fuzz_one(in);
  return 0;
}
