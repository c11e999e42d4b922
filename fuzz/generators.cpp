// Batches are drawn with rc::gen::exec, so every choice (B, V, each batch item's row counts,
// each token, each row's recipe) is a RapidCheck pick that shrinks on its own; picks are laid
// out so that shrinking towards 0 makes a batch smaller and plainer (fewer items, smaller V,
// no injected specials). A row's V values come from a seeded engine, not from V picks: real
// vocab sizes would make shrinking crawl, and the structure, not one logit, is what shrinks.
#include "generators.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>

#include "harness/half_precision.hpp"
#include "logprobs/canonical_arithmetic.hpp"

namespace logprobs::gen {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::uint64_t kRealVocabs[] = {32000, 128256, 152064};
constexpr std::uint64_t kLogitBudget = 1u << 20;  // floats per batch, to keep cases fast

using Fixed = BatchOptions;

// n * size / 100, the share of a maximum that RapidCheck's size (0..100) allows.
int scaled(int size, int n) { return static_cast<int>(std::int64_t(n) * std::clamp(size, 0, 100) / 100); }

// A uniform pick in [lo, hi) that shrinks towards lo. RapidCheck's inRange narrows its range
// with the size; here the size is applied explicitly (scaled()), so picks get the full range.
template <typename T>
T pick(T lo, T hi) {
  return *rc::gen::resize(100, rc::gen::inRange<T>(lo, hi));
}

// One of the options, shrinking towards the first (rc::gen::element does not shrink).
template <typename T, std::size_t N>
T pick_of(const T (&options)[N]) {
  return options[pick<std::size_t>(0, N)];
}

// True with probability percent / 100; shrinks to false.
bool chance(int percent) { return pick(0, 100) >= 100 - percent; }

// How one row is filled: drawn with picks, applied with a seeded engine.
struct RowRecipe {
  ValueShape shape = ValueShape::normal;
  float sigma = 1;
  std::uint32_t seed = 0;
  int mask = 0;  // 0 none, 1 a random share of entries is -inf, 2 every entry is -inf
  bool nan = false;
  bool pos_inf = false;
};

RowRecipe draw_recipe(const Fixed& fixed) {
  RowRecipe r;
  static constexpr ValueShape kShapes[] = {ValueShape::normal,    ValueShape::bf16,       ValueShape::large,
                                            ValueShape::constant,  ValueShape::ascending,  ValueShape::descending,
                                            ValueShape::peaked};
  static constexpr float kSigmas[] = {1.0f, 0.1f, 3.0f, 10.0f};
  r.shape = fixed.values ? *fixed.values : pick_of(kShapes);
  r.sigma = pick_of(kSigmas);
  r.seed = pick<std::uint32_t>(0, 1u << 30);
  r.mask = chance(20) ? (chance(15) ? 2 : 1) : 0;
  r.nan = chance(5);
  r.pos_inf = chance(5);
  if (fixed.finite) r.mask = 0, r.nan = r.pos_inf = false;
  return r;
}

void fill_row(float* x, std::uint64_t vocab, const RowRecipe& r) {
  std::mt19937_64 engine(r.seed);
  std::normal_distribution<float> normal(0.0f, r.sigma);
  std::uniform_real_distribution<float> uniform(-1e4f, 1e4f);
  switch (r.shape) {
    case ValueShape::normal:
      for (std::uint64_t j = 0; j < vocab; ++j) x[j] = normal(engine);
      break;
    case ValueShape::bf16:
      for (std::uint64_t j = 0; j < vocab; ++j) x[j] = round_to(LogitsDtype::bf16, normal(engine));
      break;
    case ValueShape::large:
      for (std::uint64_t j = 0; j < vocab; ++j) x[j] = uniform(engine);
      break;
    case ValueShape::constant:
      std::fill(x, x + vocab, normal(engine));
      break;
    case ValueShape::peaked:
      break;  // filled below, where positions are drawn
    case ValueShape::ascending:
    case ValueShape::descending:
      for (std::uint64_t j = 0; j < vocab; ++j) x[j] = normal(engine);
      std::sort(x, x + vocab);
      if (r.shape == ValueShape::descending) std::reverse(x, x + vocab);
      break;
  }
  std::uniform_int_distribution<std::uint64_t> position(0, vocab - 1);
  if (r.shape == ValueShape::peaked) {
    // The sea sits 16.6 below the peak (each exp just under half an ulp of a running sum near
    // 1, the f32 sum's worst case) or, with sigma, a little higher or lower.
    const float sea = -16.6f + (r.sigma == 1.0f ? 0.0f : r.sigma - 3.0f);
    std::fill(x, x + vocab, sea);
    x[position(engine)] = 0.0f;
  }
  if (r.mask == 2) std::fill(x, x + vocab, -kInf);
  if (r.mask == 1) {
    const std::uint64_t masked = position(engine);  // up to V - 1 entries, some maybe twice
    for (std::uint64_t i = 0; i < masked; ++i) x[position(engine)] = -kInf;
  }
  if (r.nan) x[position(engine)] = kNaN;
  if (r.pos_inf) x[position(engine)] = kInf;
}

std::uint64_t draw_real_vocab() {
  return pick_of(kRealVocabs);
}

// 1 to `most` times `unit`, or one entry less or more: where a kernel's loops change bounds.
std::uint64_t near_multiple(std::uint64_t unit, std::uint64_t most) {
  static constexpr std::int64_t kOffsets[] = {0, -1, 1};
  const std::uint64_t multiple = pick<std::uint64_t>(1, most + 1) * unit;
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(multiple) + pick_of(kOffsets));
}

// SPEC §8's group of 16 segments of 1024 entries: the CPU backend's chunk.
constexpr std::uint64_t kGroup = canonical::kGroupSegments * canonical::kSegment;

// V: a few entries (K >= V, heavy ties at high levels); near a multiple of SPEC §8's tile or
// segment; or any up to 4096, as the size allows (one pick chooses: the last draws as before).
std::uint64_t draw_vocab(int size) {
  const int kind = pick(0, 100);
  if (kind >= 70) return pick<std::uint64_t>(1, 17);
  if (kind >= 55) return chance(50) ? near_multiple(canonical::kTile, 16) : near_multiple(canonical::kSegment, 4);
  return pick<std::uint64_t>(1, 1 + std::max(16, scaled(size, 4096)));
}

// Row, token and output counts of one batch item, plus what the arbitrary shape adds.
struct ItemShape {
  std::uint32_t logit_rows = 0;
  std::uint32_t tokens = 0;
  std::uint32_t outputs = 0;
};

ItemShape draw_item(OffsetShape offsets, int max_rows) {
  ItemShape item;
  switch (offsets) {
    case OffsetShape::no_echo:
      item.logit_rows = item.outputs = 1;
      item.tokens = pick<std::uint32_t>(0, max_rows + 1);  // never read
      break;
    case OffsetShape::echo:
      item.logit_rows = item.tokens = item.outputs = pick<std::uint32_t>(1, max_rows + 1);
      break;
    case OffsetShape::arbitrary:
      item.logit_rows = pick<std::uint32_t>(0, max_rows + 1);
      item.outputs = pick<std::uint32_t>(0, item.logit_rows + 1);
      item.tokens = (item.outputs == 0 ? 0 : item.outputs - 1) + pick<std::uint32_t>(0, 3);
      break;
  }
  return item;
}

// NaN bit patterns with payloads, quiet and signaling, of either sign: a kernel that tests NaN by
// one pattern, or loses the payload's sign, shows it.
constexpr std::uint32_t kF32NaNs[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xffc0dead};
constexpr std::uint16_t kHalfNaNs[2][4] = {{0x7fc0u, 0xffc1u, 0x7f81u, 0xffffu},   // bf16
                                           {0x7e00u, 0xfe01u, 0x7c01u, 0xffffu}};  // f16

// How a batch's logits are stored: f32, or rounded to a 16-bit dtype (their own ties come with
// the rounding); and how many entries of read rows become NaN payloads or infinities of that
// dtype, placed by a seeded engine. Drawn before the rows, so that shrinking the rows leaves
// these picks where they are.
struct DtypeRecipe {
  LogitsDtype dtype = LogitsDtype::f32;
  int specials = 0;
  std::uint32_t seed = 0;
};

DtypeRecipe draw_dtype_recipe(const Fixed& fixed) {
  static constexpr LogitsDtype kDtypes[] = {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16};
  DtypeRecipe r;
  r.dtype = chance(35) ? pick_of(kDtypes) : LogitsDtype::f32;
  r.specials = chance(15) ? pick(1, 4) : 0;
  r.seed = pick<std::uint32_t>(0, 1u << 30);
  if (fixed.dtype) r.dtype = *fixed.dtype;
  if (fixed.finite) r.specials = 0;
  return r;
}

void apply_dtype(BatchData& batch, const DtypeRecipe& r) {
  if (r.dtype != LogitsDtype::f32) batch = with_dtype(batch, r.dtype);
  const std::uint32_t first = batch.logit_row_offsets.front(), last = batch.logit_row_offsets.back();
  if (first == last) return;
  std::mt19937 engine(r.seed);
  const auto uniform = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(engine); };
  for (int i = 0; i < r.specials; ++i) {
    const std::uint64_t at = (first + uniform(last - first)) * batch.row_stride + uniform(batch.vocab);
    const std::uint64_t which = uniform(6);  // a NaN pattern, or an infinity
    const bool negative = uniform(2) == 1;
    if (r.dtype == LogitsDtype::f32) {
      batch.logits[at] = which < 5 ? std::bit_cast<float>(kF32NaNs[which]) : (negative ? -kInf : kInf);
    } else {
      const bool is_bf16 = r.dtype == LogitsDtype::bf16;
      const std::uint16_t infinity = is_bf16 ? 0x7f80u : 0x7c00u;
      batch.logits16[at] = which < 4 ? kHalfNaNs[is_bf16 ? 0 : 1][which]
                                     : static_cast<std::uint16_t>(infinity | (negative ? 0x8000u : 0u));
    }
  }
}

// Temperatures for some batches: near 0.05 (sharp), exactly 1 (which must change no bit), or up
// to 4 (flat); a division by a T below 1 also turns distinct x into equal x / T now and then.
std::optional<std::vector<float>> draw_temperatures(int items, std::optional<bool> fixed) {
  const bool drawn = chance(30);  // drawn even when fixed, so that the picks after it stay in place
  if (!fixed.value_or(drawn)) return std::nullopt;
  std::vector<float> temperatures;
  for (int b = 0; b < items; ++b) {
    switch (pick(0, 3)) {
      case 0:
        temperatures.push_back(1.0f);
        break;
      case 1:
        temperatures.push_back(0.05f * (1.0f + float(pick(0, 64)) / 256.0f));
        break;
      default:
        temperatures.push_back(0.1f + 3.9f * float(pick(0, 1024)) / 1024.0f);
        break;
    }
  }
  return temperatures;
}

BatchData draw_batch(const Fixed& fixed, int size) {
  static constexpr OffsetShape kOffsetShapes[] = {OffsetShape::no_echo, OffsetShape::echo, OffsetShape::arbitrary};
  const OffsetShape offsets = fixed.offsets ? *fixed.offsets : pick_of(kOffsetShapes);
  // Long rows (real vocab sizes, or 1 to 3 groups and an entry off) only with B <= 2 and at most
  // 2 rows per item (below), to keep memory small; a lone row is then split across threads. One
  // pick chooses, so that the other batches are drawn as they were before groups were added.
  const int vocab_kind = pick(0, 100);
  const bool long_rows = vocab_kind >= 91, real_vocab = vocab_kind >= 97;
  int max_items = long_rows ? 2 : scaled(size, 64);
  // A fixed V keeps every item's row within the logit budget, as real vocab sizes do.
  if (fixed.vocab)
    max_items =
        static_cast<int>(std::min<std::uint64_t>(max_items, std::max<std::uint64_t>(1, kLogitBudget / *fixed.vocab)));
  const int items = pick(0, 1 + max_items);
  BatchData batch;
  batch.vocab = real_vocab ? draw_real_vocab() : long_rows ? near_multiple(kGroup, 3) : draw_vocab(size);
  if (fixed.vocab) batch.vocab = *fixed.vocab;
  const DtypeRecipe dtype = draw_dtype_recipe(fixed);
  batch.temperatures = draw_temperatures(items, fixed.temperatures);
  const bool arbitrary = offsets == OffsetShape::arbitrary;
  batch.row_stride = batch.vocab + (arbitrary ? pick<std::uint64_t>(0, 5) : 0);

  // Rows per batch item: at most 2 in long rows, else as the logit budget allows.
  const std::uint64_t budget_rows = kLogitBudget / (std::max(1, items) * batch.row_stride);
  const int max_rows = long_rows ? 2 : static_cast<int>(std::clamp<std::uint64_t>(budget_rows, 1, 1 + scaled(size, 8)));

  const std::uint32_t lead_rows = arbitrary ? pick<std::uint32_t>(0, 3) : 0;
  const std::uint32_t lead_tokens = arbitrary ? pick<std::uint32_t>(0, 3) : 0;
  batch.logit_row_offsets = {lead_rows};
  batch.token_row_offsets = {lead_tokens};
  batch.lp_output_offsets = {0};
  for (int b = 0; b < items; ++b) {
    const ItemShape item = draw_item(offsets, max_rows);
    batch.logit_row_offsets.push_back(batch.logit_row_offsets.back() + item.logit_rows);
    batch.token_row_offsets.push_back(batch.token_row_offsets.back() + item.tokens);
    batch.lp_output_offsets.push_back(batch.lp_output_offsets.back() + item.outputs);
  }
  const std::uint32_t trailing_rows = arbitrary ? pick<std::uint32_t>(0, 3) : 0;
  const std::uint32_t trailing_tokens = arbitrary ? pick<std::uint32_t>(0, 3) : 0;

  const auto vocab = static_cast<std::uint32_t>(batch.vocab);
  const std::uint32_t token_count = batch.token_row_offsets.back() + trailing_tokens;
  // SPEC §4 bounds only the tokens a kernel reads; in the arbitrary shape the others are
  // sometimes out of range, so a backend that reads one shows it.
  std::vector<bool> read(token_count, false);
  for (int b = 0; b < items; ++b) {
    const std::uint32_t outputs = batch.lp_output_offsets[b + 1] - batch.lp_output_offsets[b];
    for (std::uint32_t r = 1; r < outputs; ++r) read[batch.token_row_offsets[b + 1] - r] = true;
  }
  const auto draw_token = [&](bool is_read) {
    static constexpr std::uint32_t kOutOfRange[] = {0xFFFFFFFFu, 0x80000000u};
    if (!is_read && arbitrary && chance(10)) return chance(50) ? vocab : pick_of(kOutOfRange);
    return pick<std::uint32_t>(0, vocab);
  };
  for (std::uint32_t i = 0; i < token_count; ++i) batch.tokens.push_back(draw_token(read[i]));
  for (int b = 0; b < items; ++b)
    batch.sampled_tokens.push_back(draw_token(batch.lp_output_offsets[b + 1] > batch.lp_output_offsets[b]));

  batch.rows = batch.logit_row_offsets.back() + trailing_rows;
  batch.logits.assign(batch.rows * batch.row_stride, kNaN);  // unread rows and stride gaps stay NaN
  for (std::uint64_t i = lead_rows; i < batch.logit_row_offsets.back(); ++i)
    fill_row(batch.row(i), batch.vocab, draw_recipe(fixed));
  apply_dtype(batch, dtype);
  return batch;
}

rc::Gen<BatchData> make(Fixed fixed) {
  return rc::gen::withSize([fixed](int size) { return rc::gen::exec([fixed, size] { return draw_batch(fixed, size); }); });
}

}  // namespace

rc::Gen<BatchData> batch() { return make({}); }

rc::Gen<BatchData> batch(OffsetShape offsets, ValueShape values) {
  BatchOptions options;
  options.offsets = offsets;
  options.values = values;
  return make(options);
}

rc::Gen<BatchData> batch(const BatchOptions& options) { return make(options); }

rc::Gen<std::uint32_t> k() {
  return rc::gen::exec([] {
    switch (pick(0, 10)) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
        return top_k(pick(0, kMaxLevels + 1));  // MAX's K = 2^L - 1
      case 5:
      case 6:
        return chance(50) ? 5u : 20u;  // OpenAI's, vLLM's limits
      case 7:
      case 8:
        return pick<std::uint32_t>(0, 300);
      default:
        return pick<std::uint32_t>(0, kMaxK + 1);
    }
  });
}

std::optional<Counterexample> find_counterexample(const rc::Gen<BatchData>& generator, std::uint64_t seed, int size,
                                                  const std::function<bool(const BatchData&)>& fails, int max_tries) {
  rc::Shrinkable<BatchData> current = generator(rc::Random(seed), size);
  if (!fails(current.value())) return std::nullopt;
  Counterexample found{current.value(), 0};
  int tries = 1;
  bool shrunk = true;
  while (shrunk && tries < max_tries) {
    shrunk = false;
    auto shrinks = current.shrinks();
    while (auto next = shrinks.next()) {
      BatchData candidate = next->value();
      ++tries;
      if (fails(candidate)) {
        current = std::move(*next);
        found = {std::move(candidate), found.shrink_steps + 1};
        shrunk = true;
        break;
      }
      if (tries >= max_tries) break;
    }
  }
  // RapidCheck replays the draws after the item count differently once that count shrinks, so
  // a batch whose items each fail alone can stop at several of them (B = 2 to 4 in 4 of 14
  // failing seeds of a planted fault). Deleting items one at a time, last first, finishes it.
  for (std::size_t b = found.batch.sampled_tokens.size(); b-- > 0 && tries < max_tries;) {
    BatchData candidate = without_item(found.batch, b);
    ++tries;
    if (fails(candidate)) found = {std::move(candidate), found.shrink_steps + 1};
  }
  return found;
}

}  // namespace logprobs::gen

namespace logprobs {

namespace {
template <typename T>
void show_list(std::ostream& os, const char* name, const std::vector<T>& values) {
  os << name << "=[";
  for (std::size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
  os << "] ";
}
}  // namespace

void showValue(const BatchData& batch, std::ostream& os) {
  os << "BatchData{B=" << batch.sampled_tokens.size() << " V=" << batch.vocab << " rows=" << batch.rows
     << " stride=" << batch.row_stride << " dtype=" << dtype_name(batch.dtype) << " ";
  if (batch.temperatures) show_list(os, "temperatures", *batch.temperatures);
  show_list(os, "lro", batch.logit_row_offsets);
  show_list(os, "tro", batch.token_row_offsets);
  show_list(os, "loo", batch.lp_output_offsets);
  show_list(os, "sampled", batch.sampled_tokens);
  show_list(os, "tokens", batch.tokens);
  if (batch.logits.size() <= 64) show_list(os, "logits", batch.logits);
  if (batch.logits16.size() <= 64) show_list(os, "logits16", batch.logits16);
  os << "}";
}

}  // namespace logprobs
