// RapidCheck generators of valid ragged batches (SPEC §1, §4), shared by the property tests and
// the `logprobs-check` campaign.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "batch_data.hpp"

namespace logprobs::gen {

// How the three offset arrays relate.
enum class OffsetShape {
  echo,       // logit, token and output offsets all equal the input offsets
  no_echo,    // one logit row and one output row per batch item: offsets 0, 1, 2, ...
  arbitrary,  // any valid offsets
};

// How a row's values are drawn.
enum class ValueShape {
  normal,       // N(0, sigma)
  bf16,         // normal, rounded to bf16: many ties
  large,        // magnitudes up to 1e4
  constant,     // every entry equal
  ascending,    // sorted ascending: threshold filtering's worst case
  descending,   // sorted descending
};

// Any valid batch: B 0..64, V 1..4096 with occasional real vocab sizes on few rows, offsets of
// every shape, values of every shape, with -inf masks, NaN and +inf injected into some rows.
rc::Gen<BatchData> batch();

// A valid batch with offsets and values of the given shapes (other choices still random).
rc::Gen<BatchData> batch(OffsetShape offsets, ValueShape values);

// levels 0..16.
rc::Gen<int> levels();

// A case that a predicate rejects, shrunk as far as RapidCheck's shrinks reach.
struct Counterexample {
  BatchData batch;
  int shrink_steps = 0;
};

// Draws from `generator` with `seed` at size `size`; if `fails` holds for the drawn batch,
// shrinks it while `fails` keeps holding and returns the smallest one reached.
std::optional<Counterexample> find_counterexample(const rc::Gen<BatchData>& generator, std::uint64_t seed,
                                                  int size, const std::function<bool(const BatchData&)>& fails);

}  // namespace logprobs::gen
