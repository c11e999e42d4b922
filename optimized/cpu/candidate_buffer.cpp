#include "candidate_buffer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace logprobs::cpu {

void CandidateBuffer::reset(std::uint32_t k) {
  k_ = k;
  count_ = 0;
  // K = 0: nothing may enter, not even +inf (x > +inf is false for every x).
  threshold_ = k == 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  // Compaction costs O(capacity) and happens once per (capacity - K) admissions; 3K + 512 keeps
  // that a few operations per admitted entry while the threshold still rises early in a row.
  capacity_ = k == 0 ? 0 : 3 * std::size_t{k} + 512;
  if (values_.size() < capacity_ + kSlack) {
    values_.resize(capacity_ + kSlack);
    tokens_.resize(capacity_ + kSlack);
  }
  seeded_ = false;
  admitted_since_seed_check_ = 0;
  seed_budget_ = 0;
}

void CandidateBuffer::compact() {
  if (count_ <= k_) return;
  scratch_.assign(values_.begin(), values_.begin() + std::ptrdiff_t(count_));
  // Entries are never NaN (admission is x > threshold), so std::greater is a strict weak order.
  std::nth_element(scratch_.begin(), scratch_.begin() + (k_ - 1), scratch_.end(), std::greater<float>());
  const float kth = scratch_[k_ - 1];
  std::size_t above = 0;
  for (std::size_t i = 0; i < count_; ++i) above += values_[i] > kth;
  // Keep everything above the K-th value and, of the entries equal to it, the first ones in
  // token order (the total order's tie-break), preserving token order.
  std::size_t equal_left = k_ - above;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const float v = values_[i];
    const bool keep = v > kth || (v == kth && equal_left > 0);
    if (v == kth && keep) --equal_left;
    values_[kept] = v;
    tokens_[kept] = tokens_[i];
    kept += keep;
  }
  count_ = kept;
  threshold_ = kth;
}

void CandidateBuffer::start_chunk(std::uint64_t chunk_size) {
  seeded_ = k_ == 0;
  admitted_since_seed_check_ = 0;
  // A random row admits about K (1 + ln(n / K)) entries in a running top-K scan of n, plus the
  // first `capacity` before the threshold first rises; twice that means the order is adversarial.
  const double n = double(chunk_size), k = double(k_);
  const double typical = n > k && k > 0 ? k * (1.0 + std::log(n / k)) : n;
  seed_budget_ = std::uint64_t(double(capacity_) + 2.0 * typical);
}

void CandidateBuffer::seed_from_ahead(const float* ahead, std::uint64_t n) {
  seeded_ = true;
  // The last entries of the range: for ascending rows they are the largest, so t is exact.
  const std::uint64_t sample = std::min<std::uint64_t>(n, std::max<std::uint64_t>(2 * std::uint64_t{k_}, 256));
  scratch_.clear();
  for (std::uint64_t i = n - sample; i < n; ++i) {
    const float v = ahead[i];
    if (v > -std::numeric_limits<float>::infinity()) scratch_.push_back(v);  // candidates only
  }
  if (scratch_.size() < k_) return;
  std::nth_element(scratch_.begin(), scratch_.begin() + (k_ - 1), scratch_.end(), std::greater<float>());
  // Just below t, so that entries equal to t are still admitted (t may be the K-th best itself).
  const float below_t = std::nextafter(scratch_[k_ - 1], -std::numeric_limits<float>::infinity());
  threshold_ = std::max(threshold_, below_t);
}

}  // namespace logprobs::cpu
