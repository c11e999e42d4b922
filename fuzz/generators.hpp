// RapidCheck generators of valid ragged batches (SPEC §1, §4), shared by the property tests and
// the `logprobs-check` campaign.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>

#include "harness/batch_data.hpp"

namespace logprobs::gen {

// How the three offset arrays relate.
enum class OffsetShape {
  no_echo,    // one logit row and one output row per batch item: offsets 0, 1, 2, ...
  echo,       // logit, token and output offsets all equal the input offsets
  arbitrary,  // any valid offsets: unread leading logit rows, spare tokens, row stride > V
};

// How a row's values are drawn.
enum class ValueShape {
  normal,       // N(0, sigma)
  bf16,         // normal, rounded to bf16: many ties
  large,        // magnitudes up to 1e4
  constant,     // every entry equal
  ascending,    // sorted ascending: threshold filtering's worst case
  descending,   // sorted descending
  peaked,       // one dominant logit over a flat sea far below it: a confident model's row, and
                // the worst case of an f32 running sum (see Tolerance in comparator.hpp)
};

// Any valid batch: B 0..64, V 1..4096 (often a multiple of SPEC §8's tile or segment, or one
// entry off it), with occasional real vocab sizes (32000, 128256, 152064) and rows of one to
// three groups of 16 segments (or one entry off) on at most 2 batch items of at most 2 rows
// (so sometimes a single row, long enough to be split across threads); offsets of every shape,
// values of every shape, with -inf masks, NaN and +inf injected into some rows; logits f32, bf16
// or f16 (with NaN payloads and infinities of that dtype), and temperatures for some batches.
// The RapidCheck size (0..100) scales B, V and rows per batch item. Logits no batch item reads
// (stride gaps, rows outside [lro[0], lro[B])) are NaN, and tokens no output row reads (spare
// tokens, the sampled token of an item without output rows) are sometimes >= V, so a backend
// that reads them shows it.
rc::Gen<BatchData> batch();

// A valid batch with offsets and values of the given shapes (other choices still random).
rc::Gen<BatchData> batch(OffsetShape offsets, ValueShape values);

// Choices a caller may fix (a kernel that takes one dtype or one vocabulary size, the C API's
// random batches); each one left empty is drawn as batch() draws it, and with nothing fixed the
// draws, and their shrinks, are batch()'s. A fixed dtype, vocab or temperature choice overrides
// its pick rather than skipping it, so the picks after it stay where they were.
struct BatchOptions {
  std::optional<OffsetShape> offsets;
  std::optional<ValueShape> values;
  std::optional<LogitsDtype> dtype;
  std::optional<std::uint64_t> vocab;  // V, which then does not shrink; fewer batch items when V is large
  std::optional<bool> temperatures;    // always or never
  bool finite = false;  // no NaN, no infinity, no -inf mask in any row a kernel reads (unread ones stay NaN)
};
rc::Gen<BatchData> batch(const BatchOptions& options);

// K 0..65535: MAX's K = 2^L - 1 half the time, 5 and 20 (OpenAI's and vLLM's usual limits), small
// K of every other value, and any.
rc::Gen<std::uint32_t> k();

// A case that a predicate rejects, shrunk as far as RapidCheck's shrinks reach.
struct Counterexample {
  BatchData batch;
  int shrink_steps = 0;
};

// Draws from `generator` with `seed` at size `size`; if `fails` holds for the drawn batch,
// shrinks it while `fails` keeps holding and returns the smallest one reached. Shrinking is
// greedy (the first failing shrink is taken) and stops after `max_tries` calls of `fails`.
std::optional<Counterexample> find_counterexample(const rc::Gen<BatchData>& generator, std::uint64_t seed,
                                                  int size, const std::function<bool(const BatchData&)>& fails,
                                                  int max_tries = 20000);

}  // namespace logprobs::gen

namespace logprobs {
// A short description (B, V, offsets, tokens; the logits when small), which RapidCheck prints
// for a counterexample.
void showValue(const BatchData& batch, std::ostream& os);
}  // namespace logprobs
