// validate_batch on arbitrary shapes, offsets, tokens, K, dtypes, temperatures and output shapes. It may only
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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

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
  std::uint32_t k = 0;
  std::uint8_t dtype = 0;  // 3 is no LogitsDtype
  bool logits_null = false;
  std::vector<std::uint32_t> tokens, sampled_tokens, logit_row_offsets, token_row_offsets, lp_output_offsets;
  std::optional<std::vector<float>> temperatures;

  RaggedBatch view(const void* logits) const {
    RaggedBatch v{.logits = logits_null ? nullptr : logits,
                  .dtype = static_cast<LogitsDtype>(dtype),
                  .rows = rows,
                  .vocab = vocab,
                  .row_stride = row_stride,
                  .tokens = tokens,
                  .sampled_tokens = sampled_tokens,
                  .logit_row_offsets = logit_row_offsets,
                  .token_row_offsets = token_row_offsets,
                  .lp_output_offsets = lp_output_offsets,
                  .temperatures = std::nullopt};
    if (temperatures) v.temperatures = std::span<const float>(*temperatures);
    return v;
  }
};

// K: small mostly (so that the batch is computed), any 32-bit value sometimes.
std::uint32_t any_k(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? in.ConsumeIntegral<std::uint32_t>() : in.ConsumeIntegralInRange<std::uint32_t>(0, 40);
}

// Temperatures for `count` batch items, or none; valid ones mostly, and every invalid kind.
std::optional<std::vector<float>> any_temperatures(FuzzedDataProvider& in, std::size_t count) {
  if (in.ConsumeBool()) return std::nullopt;
  static constexpr float kValues[] = {
      1.0f,  0.05f, 3.5f, 0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
      1e-38f};
  std::vector<float> t(in.ConsumeBool() ? count : in.ConsumeIntegralInRange<std::size_t>(0, 10));
  for (float& v : t)
    v = in.ConsumeIntegralInRange(0, 9) < 8 ? 1.0f : kValues[in.ConsumeIntegralInRange<std::size_t>(0, 7)];
  return t;
}

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
  f.k = any_k(in);
  f.dtype = in.ConsumeIntegralInRange<std::uint8_t>(0, 3);
  f.logits_null = in.ConsumeBool();
  f.temperatures = any_temperatures(in, b_count);
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
  f.k = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint32_t>(0, 40)
                         : in.ConsumeIntegralInRange<std::uint32_t>(kMaxK - 2, kMaxK + slack);
  f.dtype = in.ConsumeIntegralInRange<std::uint8_t>(0, 2);
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
  f.temperatures = any_temperatures(in, f.sampled_tokens.size());
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
    case 3:
      f.k = any_k(in);
      return;
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

// The output buffers: of the accepted shape, or of any small shape and sizes; ranks asked or not.
struct Outputs {
  std::vector<float> lp_logits;
  std::vector<std::uint32_t> lp_tokens;
  std::vector<std::uint32_t> lp_ranks;
  LogprobsOutput view;
};

Outputs outputs(FuzzedDataProvider& in, const OutputShape& shape) {
  Outputs out;
  const bool exact = !in.ConsumeBool() && shape.rows * shape.width <= kMaxComputedElements;
  const std::uint64_t rows = exact ? shape.rows : number(in, 8);
  const std::uint64_t width = exact ? shape.width : number(in, 8);
  const bool ranks = in.ConsumeBool();
  out.lp_logits.resize(exact ? rows * width : in.ConsumeIntegralInRange<std::size_t>(0, 64));
  out.lp_tokens.resize(exact || in.ConsumeBool() ? out.lp_logits.size() : in.ConsumeIntegralInRange<std::size_t>(0, 64));
  // Ranks [N] when asked and the shape is exact, mostly; else a few, which only an exact N of 0..4 accepts.
  out.lp_ranks.resize(ranks && exact && !in.ConsumeBool() ? rows : in.ConsumeIntegralInRange<std::size_t>(0, 4));
  out.view = {out.lp_logits, out.lp_tokens, rows, width, ranks, out.lp_ranks};
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
  const std::uint32_t k = fields.k;

  OutputShape shape;
  try {
    shape = validate_batch(batch, k);
  } catch (const InvalidBatch&) {
    return;
  }
  require(k <= kMaxK && shape.width == slots_per_row(k), "K <= 65535, W = K + 1");
  require(fields.dtype <= 2, "a known dtype");
  if (batch.temperatures)
    for (const float t : *batch.temperatures) require(std::isfinite(t) && t > 0, "temperatures finite and above 0");
  for (const RowTask& task : plan_rows(batch)) {
    require(task.output_row < shape.rows, "output row < N");
    require(task.logit_row < batch.rows, "logit row < rows");
    require(task.token < batch.vocab, "evaluated token < V");
  }

  Outputs out = outputs(in, shape);
  try {
    validate_batch(batch, k, out.view);
  } catch (const InvalidBatch&) {
    return;
  }
  require(out.view.rows == shape.rows && out.view.width == shape.width, "output shape [N, W]");
  require(out.lp_logits.size() == shape.rows * shape.width && out.lp_tokens.size() == out.lp_logits.size(),
          "output sizes N * W");
  require(out.lp_ranks.size() == (out.view.ranks ? shape.rows : 0), "ranks [N] when asked, none otherwise");

  // Compute on logits of exactly rows * row_stride elements of the dtype (row_stride >= V >= 1).
  if (batch.rows > kMaxComputedElements / batch.row_stride) return;
  std::vector<std::byte> logits(batch.rows * batch.row_stride * dtype_bytes(batch.dtype));
  for (std::byte& b : logits)
    b = std::byte{in.remaining_bytes() > 0 ? in.ConsumeIntegral<std::uint8_t>() : std::uint8_t{0x3f}};
  batch.logits = logits.data();
  for (const Backend* backend : available_host_backends()) {
    // A backend refuses exactly the parts it lacks (SPEC §4), before it reads anything.
    const bool lacks = !missing_part(backend->features(), batch, k, out.view.ranks).empty();
    try {
      backend->run(batch, k, out.view);
      require(!lacks, "a backend ran a batch needing a part it lacks");
    } catch (const UnsupportedPart&) {
      require(lacks, "a backend refused a part it implements");
    }
  }
}

}  // namespace
}  // namespace logprobs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  logprobs::fuzz::fuzz_one(in);
  return 0;
}
