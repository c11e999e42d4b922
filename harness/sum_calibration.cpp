#include "sum_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "reference/exp_sum.hpp"

namespace logprobs {
namespace {

// The row goes through in chunks of 1024 entries: a multiple of every L, so entry j's lane j mod L
// is its index in the chunk mod L, and the chunk's e_j stay in L1 while every L adds them.
constexpr std::size_t kChunk = 1024;

// Lane l of L adds e[l], e[l + L], ... in index order. The loop over l runs the L lanes side by
// side (the compiler vectorizes it), which changes no lane's order of additions.
template <std::size_t L>
void add_to_lanes(float* lanes, const float* e) {
  for (std::size_t base = 0; base < kChunk; base += L)
    for (std::size_t l = 0; l < L; ++l) lanes[l] = lanes[l] + e[base + l];
}

// The lane sums added in f32 in a tree of adjacent pairs (L is a power of 2: no odd one out).
float lane_tree(const float* lanes, std::size_t count) {
  float level[kChunk];
  std::copy(lanes, lanes + count, level);
  for (std::size_t width = count / 2; width >= 1; width /= 2)
    for (std::size_t i = 0; i < width; ++i) level[i] = level[2 * i] + level[2 * i + 1];
  return level[0];
}

// The chunk's e_j summed in double: eight running sums, so the additions vectorize. Any order
// serves: n nonnegative terms sum in double within n * 2^-53 relative (2^-33 at a million), far
// below the drifts of f32 sums that this sum measures.
double exact_sum(const float* e) {
  double parts[8] = {};
  for (std::size_t base = 0; base < kChunk; base += 8)
    for (std::size_t l = 0; l < 8; ++l) parts[l] += double(e[base + l]);
  double sum = 0;
  for (const double part : parts) sum += part;
  return sum;
}

template <std::size_t... I>
void add_to_every_lane_count(float* lanes, const float* e, std::index_sequence<I...>) {
  std::size_t offset = 0;
  ((add_to_lanes<kCalibrationLanes[I]>(lanes + offset, e), offset += kCalibrationLanes[I]), ...);
}

constexpr std::size_t kAllLanes = [] {
  std::size_t total = 0;
  for (const std::uint32_t l : kCalibrationLanes) total += l;
  return total;
}();

}  // namespace

double SumCalibration::dev() const { return *std::max_element(deviation.begin(), deviation.end()); }

SumCalibration calibrate_sums(std::span<const float> x, float m) {
  alignas(64) float lanes[kAllLanes] = {};  // the lanes of L = 4, then of L = 8, ...
  alignas(64) float e[kChunk];
  double exact = 0;
  for (std::size_t begin = 0; begin < x.size(); begin += kChunk) {
    const std::size_t n = std::min(kChunk, x.size() - begin);
    // e_j = exp(x_j - m) in double, rounded once to f32, by the reference's exp (its bits the
    // same on every machine, as the C library's exp's are not); exp(-inf) is 0. Entries past the
    // row's end are 0, which adds nothing to any lane.
    rounded_exponentials(x.data() + begin, n, double(m), e);
    std::fill(e + n, e + kChunk, 0.0f);
    exact += exact_sum(e);
    add_to_every_lane_count(lanes, e, std::make_index_sequence<kCalibrationLanes.size()>());
  }
  SumCalibration calibration;
  calibration.log_exact_sum = std::log(exact);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < kCalibrationLanes.size(); ++i) {
    const float lane_sum = lane_tree(lanes + offset, kCalibrationLanes[i]);
    calibration.deviation[i] = std::fabs(std::log(double(lane_sum)) - calibration.log_exact_sum);
    offset += kCalibrationLanes[i];
  }
  return calibration;
}

}  // namespace logprobs
