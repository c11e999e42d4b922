// SPEC §5 (contract v3): how far an honest f32 sum of one row's exponentials drifts from the
// exact sum, found by doing such sums on that row. The comparator turns the largest drift into
// the row's summation term; `logprobs-check tolerance` prints every part of it.
//
// Why sums are done rather than bounded: an f32 sum's error depends on the row, not only on V. On
// a spread-out row the roundings of the running sums point every way and every common order stays
// within about 1e-6 of the exact normalizer; on a confident row (one logit 12-20 above a flat sea)
// every exponential but one sits near half an ulp of the running sum, the roundings all point one
// way, and a lane sum drifts by up to 2e-4 at V = 262144. The orders summed here are those of the
// kernels in the field: L lanes each adding its entries in index order (SIMD lanes times
// accumulators, a GPU warp or block with one thread per lane), then a tree over the lanes.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace logprobs {

// L = 4, 8, ..., 1024: NEON/SSE (4) to AVX-512 with several accumulators, a warp (32), a
// 1024-thread block.
inline constexpr std::array<std::uint32_t, 9> kCalibrationLanes = {4, 8, 16, 32, 64, 128, 256, 512, 1024};

struct SumCalibration {
  double log_exact_sum = 0;  // log S, S the sum in double of the e_j (each exp(x_j - m) rounded to f32)
  // |log S_L - log S| for each L of kCalibrationLanes: entry j goes to lane j mod L, each lane adds
  // its e_j in f32 in index order, and the L lane sums add in f32 in a tree of adjacent pairs.
  std::array<double, kCalibrationLanes.size()> deviation{};
  // dev: the largest of them.
  double dev() const;
};

// The calibration of a row x (SPEC §2.5's x) whose largest finite entry is m. Entries of -inf
// add nothing; the row must hold no NaN and no +inf and m must be finite (SPEC §3's rows whose
// normalizer is NaN need no tolerance: their values must be NaN).
SumCalibration calibrate_sums(std::span<const float> x, float m);

}  // namespace logprobs
