// SPEC §4, one check per rule, in the order the SPEC lists them.
#include "logprobs/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>

namespace logprobs {
namespace {

constexpr std::uint64_t kMaxVocab = std::numeric_limits<std::uint32_t>::max();

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw InvalidBatch(fmt::format(format, std::forward<Args>(args)...));
}

struct Offsets {
  std::string_view name;
  std::span<const std::uint32_t> values;
};

bool known_dtype(LogitsDtype dtype) {
  return dtype == LogitsDtype::f32 || dtype == LogitsDtype::bf16 || dtype == LogitsDtype::f16;
}

void check_shape(const RaggedBatch& batch, std::uint32_t k) {
  if (batch.vocab == 0) fail("vocab: must be at least 1, got 0");
  if (batch.vocab > kMaxVocab)
    fail("vocab: {} exceeds {} (the padding token V must fit in u32)", batch.vocab, kMaxVocab);
  if (k > kMaxK) fail("k: {} exceeds {} (levels 0..{})", k, kMaxK, kMaxLevels);
  if (batch.row_stride < batch.vocab) fail("row_stride: {} is less than vocab {}", batch.row_stride, batch.vocab);
  if (batch.rows > 0 && batch.logits == nullptr) fail("logits: null pointer for {} rows", batch.rows);
  // Byte offsets into the logits must fit a pointer difference; a count that fits 64 bits but
  // not as bytes would make host pointer arithmetic and device copy sizes wrap. (An unknown
  // dtype, reported next, counts as the widest.)
  const std::uint64_t element_bytes = known_dtype(batch.dtype) ? dtype_bytes(batch.dtype) : 4;
  const std::uint64_t max_elements = std::numeric_limits<std::ptrdiff_t>::max() / element_bytes;
  if (batch.rows > 0 && batch.rows > max_elements / batch.row_stride)
    fail("logits: rows * row_stride = {} * {} overflows the address space (at most {} elements of {} bytes)",
         batch.rows, batch.row_stride, max_elements, element_bytes);
  if (!known_dtype(batch.dtype)) fail("logits: unknown dtype (value {})", static_cast<int>(batch.dtype));
}

void check_offsets(const RaggedBatch& batch, std::span<const Offsets> all) {
  const std::uint64_t b_count = batch.batch_size();
  // B is sampled_tokens.size(), but when the three offset arrays agree with each other it is
  // sampled_tokens that is the odd one out, and the message should say so.
  const std::uint64_t first_length = all[0].values.size();
  const bool offsets_agree = std::all_of(all.begin(), all.end(),
                                         [&](const Offsets& o) { return o.values.size() == first_length; });
  if (offsets_agree && first_length > 0 && first_length != b_count + 1)
    fail("sampled_tokens: length {} but the offset arrays have length {}, so B = {} entries were expected",
         b_count, first_length, first_length - 1);
  for (const Offsets& o : all) {
    if (o.values.size() != b_count + 1)
      fail("{}: length {} but sampled_tokens has {} entries, so B + 1 = {} were expected", o.name,
           o.values.size(), b_count, b_count + 1);
  }
  if (batch.has_temperatures() && batch.temperatures->size() != b_count)
    fail("temperatures: length {} but sampled_tokens has {} entries (one temperature per batch item)",
         batch.temperatures->size(), b_count);
}

void check_offsets_increase(const RaggedBatch& batch, std::span<const Offsets> all) {
  const std::uint64_t b_count = batch.batch_size();
  for (const Offsets& o : all) {
    for (std::uint64_t b = 0; b < b_count; ++b) {
      if (o.values[b + 1] < o.values[b])
        fail("batch {}: {} decreases ({}[{}..{}] = {}..{})", b, o.name, o.name, b, b + 1, o.values[b],
             o.values[b + 1]);
    }
  }
}

void check_batches(const RaggedBatch& batch) {
  const auto lro = batch.logit_row_offsets;
  const auto tro = batch.token_row_offsets;
  const auto loo = batch.lp_output_offsets;
  const std::uint64_t b_count = batch.batch_size();

  if (loo[0] != 0) fail("lp_output_offsets[0]: must be 0, got {}", loo[0]);
  if (lro[b_count] > batch.rows)
    fail("logit_row_offsets[{}] = {} exceeds the {} logit rows", b_count, lro[b_count], batch.rows);
  if (tro[b_count] > batch.tokens.size())
    fail("token_row_offsets[{}] = {} exceeds the {} tokens", b_count, tro[b_count], batch.tokens.size());

  for (std::uint64_t b = 0; b < b_count; ++b) {
    const std::uint64_t outputs = loo[b + 1] - loo[b];
    const std::uint64_t logit_rows = lro[b + 1] - lro[b];
    const std::uint64_t tokens = tro[b + 1] - tro[b];
    if (outputs > logit_rows)
      fail("batch {}: {} output rows but only {} logit rows (logit_row_offsets[{}..{}] = {}..{})", b,
           outputs, logit_rows, b, b + 1, lro[b], lro[b + 1]);
    if (outputs > tokens + 1)
      fail("batch {}: {} output rows but only {} tokens (token_row_offsets[{}..{}] = {}..{}); "
           "{} output rows read {} tokens",
           b, outputs, tokens, b, b + 1, tro[b], tro[b + 1], outputs, outputs - 1);
    if (outputs == 0) continue;  // an empty batch reads no token
    if (batch.sampled_tokens[b] >= batch.vocab)
      fail("batch {}: sampled_tokens[{}] = {} is not below vocab {}", b, b, batch.sampled_tokens[b],
           batch.vocab);
    for (std::uint64_t r = 1; r < outputs; ++r) {
      const std::uint64_t t = tro[b + 1] - r;
      if (batch.tokens[t] >= batch.vocab)
        fail("batch {}: tokens[{}] = {} (read for output row {}) is not below vocab {}", b, t,
             batch.tokens[t], loo[b + 1] - r - 1, batch.vocab);
    }
  }
}

void check_temperatures(const RaggedBatch& batch) {
  if (!batch.has_temperatures()) return;
  for (std::uint64_t b = 0; b < batch.temperatures->size(); ++b) {
    const float t = (*batch.temperatures)[b];
    if (!std::isfinite(t) || !(t > 0.0f))
      fail("batch {}: temperatures[{}] = {} is not a finite number above 0", b, b, t);
  }
}

}  // namespace

OutputShape validate_batch(const RaggedBatch& batch, std::uint32_t k) {
  check_shape(batch, k);
  const Offsets offsets[] = {{"logit_row_offsets", batch.logit_row_offsets},
                             {"token_row_offsets", batch.token_row_offsets},
                             {"lp_output_offsets", batch.lp_output_offsets}};
  check_offsets(batch, offsets);
  check_offsets_increase(batch, offsets);
  check_batches(batch);
  check_temperatures(batch);
  return {batch.output_rows(), slots_per_row(k)};
}

void validate_batch(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) {
  const OutputShape want = validate_batch(batch, k);
  if (out.rows != want.rows || out.width != want.width)
    fail("outputs: shape [{}, {}] but [N, W] = [{}, {}] was expected", out.rows, out.width, want.rows,
         want.width);
  const std::uint64_t size = want.rows * want.width;
  if (out.lp_logits.size() != size)
    fail("lp_logits: {} elements but [N, W] = [{}, {}] needs {}", out.lp_logits.size(), want.rows,
         want.width, size);
  if (out.lp_tokens.size() != size)
    fail("lp_tokens: {} elements but [N, W] = [{}, {}] needs {}", out.lp_tokens.size(), want.rows,
         want.width, size);
  if (out.ranks && out.lp_ranks.size() != want.rows)
    fail("lp_ranks: {} elements but [N] = [{}] was expected", out.lp_ranks.size(), want.rows);
  if (!out.ranks && !out.lp_ranks.empty())
    fail("lp_ranks: {} elements given but ranks were not asked for", out.lp_ranks.size());
}

}  // namespace logprobs
