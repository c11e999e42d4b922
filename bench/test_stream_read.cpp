// stream_read's sum is the anchor of every read_bw_fraction: a loop that skipped words, or read
// some twice, would time less (or more) than the bytes it claims. Each word here is distinct
// (i * 2654435761, a multiplier that permutes 32-bit words), so a skipped or repeated word changes
// the sum.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "stream_read.hpp"

namespace logprobs::bench {
namespace {

std::uint32_t sum_of(const std::vector<std::uint32_t>& words) {
  std::uint32_t sum = 0;
  for (const std::uint32_t w : words) sum += w;
  return sum;
}

TEST(StreamRead, SumsEveryWordOnceAtEveryLengthAndThreadCount) {
  for (const std::uint64_t n : {0u, 1u, 15u, 16u, 17u, 127u, 128u, 129u, 1000u, 4097u, 100003u}) {
    std::vector<std::uint32_t> words(n);
    for (std::uint64_t i = 0; i < n; ++i) words[i] = static_cast<std::uint32_t>((i + 1) * 2654435761u);
    for (const int threads : {1, 2, 3}) {
      EXPECT_EQ(sum_words(words.data(), n, threads), sum_of(words)) << "n " << n << ", threads " << threads;
    }
  }
}

TEST(StreamRead, ReadsAWholeBufferOfTheSizeAsked) {
  // The buffer holds 1s: the sum is the number of words read.
  EXPECT_EQ(stream_read(4 * 100003, 2), 100003u);
  EXPECT_EQ(stream_read(4 * 64, 1), 64u);
}

}  // namespace
}  // namespace logprobs::bench
