#include "stream_read.hpp"

#include <omp.h>

#include <chrono>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace logprobs::bench {

namespace {

const std::vector<std::uint32_t>& buffer_of(std::uint64_t bytes) {
  static std::unique_ptr<std::vector<std::uint32_t>> buffer;
  const std::uint64_t words = bytes / sizeof(std::uint32_t);
  if (!buffer || buffer->size() != words) {
    buffer.reset();
    // Written (not just allocated) so every page is backed before it is timed.
    buffer = std::make_unique<std::vector<std::uint32_t>>(words, 1u);
  }
  return *buffer;
}

std::map<std::pair<std::uint64_t, int>, double>& bandwidths() {
  static std::map<std::pair<std::uint64_t, int>, double> measured;
  return measured;
}

}  // namespace

std::uint32_t stream_read(std::uint64_t bytes, int threads) {
  const std::vector<std::uint32_t>& words = buffer_of(bytes);
  const std::int64_t n = static_cast<std::int64_t>(words.size());
  const std::uint32_t* data = words.data();
  std::uint32_t sum = 0;
  // Integer addition is associative, so the compiler vectorizes this without -ffast-math.
#pragma omp parallel for simd reduction(+ : sum) num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) sum += data[i];
  return sum;
}

void record_read_bandwidth(std::uint64_t bytes, int threads, double bytes_per_second) {
  bandwidths()[{bytes, threads}] = bytes_per_second;
}

double read_bandwidth(std::uint64_t bytes, int threads) {
  auto& measured = bandwidths();
  if (auto it = measured.find({bytes, threads}); it != measured.end()) return it->second;
  using clock = std::chrono::steady_clock;
  volatile std::uint32_t sink = stream_read(bytes, threads);  // warm up: page in, fill caches
  std::uint64_t passes = 0;
  const auto start = clock::now();
  double seconds = 0;
  do {
    sink = sink + stream_read(bytes, threads);
    ++passes;
    seconds = std::chrono::duration<double>(clock::now() - start).count();
  } while (seconds < 0.2);
  const double rate = static_cast<double>(bytes) * static_cast<double>(passes) / seconds;
  measured[{bytes, threads}] = rate;
  return rate;
}

}  // namespace logprobs::bench
