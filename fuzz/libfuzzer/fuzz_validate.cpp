// validate_batch on arbitrary shapes, offsets, tokens, levels and output shapes. It may only
// return or throw InvalidBatch: libFuzzer reports any other exception, crash or sanitizer error.
// A batch it accepts must be safe to compute (SPEC §4: validation runs before any backend reads
// memory), so then every row plan_rows gives must lie inside the arrays, and, when the batch is
// small, every host backend runs on buffers of exactly the accepted sizes, where ASan sees any
// read or write outside them.
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstdio>
#include <cstdlib>

#include "batch_data.hpp"
#include "host_backends.hpp"

namespace logprobs::fuzz {
namespace {

constexpr std::uint64_t kMaxComputedElements = std::uint64_t{1} << 16;

void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz_validate: accepted batch breaks: %s\n", what);
    std::abort();
  }
}

// Small numbers mostly, so that valid batches are common; any 64-bit value sometimes.
std::uint64_t number(FuzzedDataProvider& in, std::uint64_t small_max) {
  return in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>() : in.ConsumeIntegralInRange<std::uint64_t>(0, small_max);
}

std::vector<std::uint32_t> u32_array(FuzzedDataProvider& in, std::size_t length, std::uint32_t small_max) {
  std::vector<std::uint32_t> values(length);
  for (auto& v : values) v = static_cast<std::uint32_t>(number(in, small_max));
  return values;
}

// An offset array: usually of the length B + 1 that validation wants, sometimes any length.
std::vector<std::uint32_t> offsets(FuzzedDataProvider& in, std::size_t b_count) {
  const std::size_t length = in.ConsumeBool() ? b_count + 1 : in.ConsumeIntegralInRange<std::size_t>(0, 10);
  std::vector<std::uint32_t> values = u32_array(in, length, 4);
  if (in.ConsumeBool()) {  // running sums: non-decreasing, as valid offsets are
    for (std::size_t i = 1; i < values.size(); ++i) values[i] += values[i - 1];
  }
  return values;
}

struct Arrays {
  std::vector<std::uint32_t> tokens, sampled_tokens, logit_row_offsets, token_row_offsets, lp_output_offsets;
};

// The output buffers: of the accepted shape, or of any small shape and sizes.
struct Outputs {
  std::vector<float> lp_logits;
  std::vector<std::uint32_t> lp_tokens;
  LogprobsOutput view;
};

Outputs outputs(FuzzedDataProvider& in, const OutputShape& shape) {
  Outputs out;
  const bool exact = in.ConsumeBool() && shape.rows * shape.width <= kMaxComputedElements;
  const std::uint64_t rows = exact ? shape.rows : number(in, 8);
  const std::uint64_t width = exact ? shape.width : number(in, 8);
  out.lp_logits.resize(exact ? rows * width : in.ConsumeIntegralInRange<std::size_t>(0, 64));
  out.lp_tokens.resize(exact || in.ConsumeBool() ? out.lp_logits.size() : in.ConsumeIntegralInRange<std::size_t>(0, 64));
  out.view = {out.lp_logits, out.lp_tokens, rows, width};
  return out;
}

void fuzz_one(FuzzedDataProvider& in) {
  static const float unread_logit = 0;  // the validator never reads logits
  Arrays a;
  const auto b_count = in.ConsumeIntegralInRange<std::size_t>(0, 8);
  a.sampled_tokens = u32_array(in, b_count, 40);
  a.logit_row_offsets = offsets(in, b_count);
  a.token_row_offsets = offsets(in, b_count);
  a.lp_output_offsets = offsets(in, b_count);
  a.tokens = u32_array(in, in.ConsumeIntegralInRange<std::size_t>(0, 24), 40);
  RaggedBatch batch;
  batch.rows = number(in, 24);
  batch.vocab = number(in, 40);
  batch.row_stride = in.ConsumeBool() ? batch.vocab + number(in, 3) : number(in, 48);
  batch.logits = in.ConsumeBool() ? nullptr : &unread_logit;
  batch.tokens = a.tokens;
  batch.sampled_tokens = a.sampled_tokens;
  batch.logit_row_offsets = a.logit_row_offsets;
  batch.token_row_offsets = a.token_row_offsets;
  batch.lp_output_offsets = a.lp_output_offsets;
  const int levels = in.ConsumeBool() ? in.ConsumeIntegral<int>() : in.ConsumeIntegralInRange(-2, 18);

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
