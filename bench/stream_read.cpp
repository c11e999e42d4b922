// stream_read (stream_read.hpp): the sum runs as Highway SIMD, compiled once per target by
// foreach_target.h and picked at run time, because the anchor must be bound by the cache or memory
// it reads, not by its own loop. A plain loop built for the baseline x86-64 target (SSE2, one
// accumulator: at most 16 bytes a cycle) measured 27 GB/s on a Zen 5 core for a 501 KiB buffer
// that L2 delivers at 210 GB/s, and the backends' fractions of it read above 100%.
// clang-format off: foreach_target.h must come first, right after HWY_TARGET_INCLUDE.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stream_read.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format on

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace logprobs::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The wrapping sum of words[0, n). Four accumulators in named registers (an array of them GCC
// keeps on the stack, where each add waits on the last one's store: 20 GB/s from memory where
// named registers read 33), so that the adds' latency never limits the loads.
std::uint32_t SumWords(const std::uint32_t* HWY_RESTRICT words, std::size_t n) {
  const hn::ScalableTag<std::uint32_t> d;
  const std::size_t lanes = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  std::size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    a0 = hn::Add(a0, hn::LoadU(d, words + i));
    a1 = hn::Add(a1, hn::LoadU(d, words + i + lanes));
    a2 = hn::Add(a2, hn::LoadU(d, words + i + 2 * lanes));
    a3 = hn::Add(a3, hn::LoadU(d, words + i + 3 * lanes));
  }
  for (; i + lanes <= n; i += lanes) a0 = hn::Add(a0, hn::LoadU(d, words + i));
  std::uint32_t sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) sum += words[i];
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace logprobs::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "hwy/aligned_allocator.h"
#include "stream_read.hpp"

namespace logprobs::bench {

HWY_EXPORT(SumWords);

namespace {

// The buffer of `bytes / 4` words, all 1, aligned to 64 bytes: from malloc's 16-byte alignment
// every zmm load may straddle two cache lines (a 501 KiB buffer read from L2 at 50 GB/s; aligned,
// and with one thread outside a parallel region, at 200).
struct Buffer {
  hwy::AlignedFreeUniquePtr<std::uint32_t[]> words;
  std::uint64_t n = 0;
};

const Buffer& buffer_of(std::uint64_t bytes) {
  static Buffer buffer;
  const std::uint64_t n = bytes / sizeof(std::uint32_t);
  if (!buffer.words || buffer.n != n) {
    buffer.words.reset();
    buffer.words = hwy::AllocateAligned<std::uint32_t>(n);
    buffer.n = n;
    // Written (not just allocated) so every page is backed before it is timed.
    std::fill_n(buffer.words.get(), n, 1u);
  }
  return buffer;
}

std::map<std::pair<std::uint64_t, int>, double>& bandwidths() {
  static std::map<std::pair<std::uint64_t, int>, double> measured;
  return measured;
}

}  // namespace

std::uint32_t sum_words(const std::uint32_t* words, std::uint64_t n, int threads) {
  // One thread without a parallel region: entering one cost 1.3 us, half the time of reading a
  // 501 KiB row from L2.
  if (threads == 1) return HWY_DYNAMIC_DISPATCH(SumWords)(words, n);
  std::uint32_t sum = 0;
  // One contiguous share per thread, as the backends' schedules read whole rows or chunks.
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  {
    const auto team = static_cast<std::uint64_t>(omp_get_num_threads());
    const auto t = static_cast<std::uint64_t>(omp_get_thread_num());
    const std::uint64_t share = n / team, begin = t * share;
    sum += HWY_DYNAMIC_DISPATCH(SumWords)(words + begin, t + 1 == team ? n - begin : share);
  }
  return sum;
}

std::uint32_t stream_read(std::uint64_t bytes, int threads) {
  const Buffer& buffer = buffer_of(bytes);
  return sum_words(buffer.words.get(), buffer.n, threads);
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
#endif  // HWY_ONCE
