// Rounding f32 to the 16-bit logit dtypes (the contract widens them back exactly, SPEC §2.5), for
// batches built from f32 values: generators, tests, files.
#pragma once

#include <cstdint>

#include "batch_data.hpp"

namespace logprobs {

// Round to nearest, ties to even; an overflow becomes the infinity of its sign, a NaN stays a
// quiet NaN with the top bits of its payload.
std::uint16_t f32_to_bf16(float x);
std::uint16_t f32_to_f16(float x);

// `x` rounded to `dtype` and widened back: the f32 value a `dtype` batch holds for it.
float round_to(LogitsDtype dtype, float x);

// An f32 batch's logits rounded to `dtype` (stride gaps included), everything else kept.
BatchData with_dtype(const BatchData& f32_batch, LogitsDtype dtype);

// Any batch's logits widened to f32 exactly: the same x, the same results (SPEC §2.5).
BatchData widened_to_f32(const BatchData& batch);

}  // namespace logprobs
