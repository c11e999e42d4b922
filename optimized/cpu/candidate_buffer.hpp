// The top-K candidates of one row (or one chunk of a row), gathered in a single pass.
//
// Admission rule: an entry is admitted iff x > threshold(). The threshold starts at -inf, so
// NaN (every comparison false) and -inf never enter and +inf does (SPEC §2.6). With K = 0 the
// threshold is +inf and nothing enters.
//
// The buffer keeps its entries in ascending token order (they are admitted in scan order, chunks
// are scanned or appended in chunk order, and compaction is stable). When it fills, compact()
// keeps exactly the K best under the total order (value descending, token ascending) and raises
// the threshold to the K-th best value t. Why the later strict `x > t` filter loses nothing of the
// final top-K under that order: every later entry has a larger token than the K kept ones, so
// with x <= t it is beaten by all K of them.
//
// The result is therefore the exact top-K under a total order, a function of the row alone: the
// same whether the row is scanned by one thread with one buffer, or chunk by chunk with one
// buffer per chunk whose survivors are appended in chunk order (SPEC §6), and the same whatever
// the threshold happened to be along the way, as long as it never rejected a top-K member.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace logprobs::cpu {

class CandidateBuffer {
 public:
  // Room past capacity() for one block of admissions: the kernel admits at most one block
  // (kBlockVectors vectors of at most 16 floats) before it compacts.
  static constexpr std::size_t kBlockVectors = 4;
  static constexpr std::size_t kSlack = (kBlockVectors + 1) * 16;

  // Empties the buffer for a row or chunk whose top-k is wanted.
  void reset(std::uint32_t k);

  std::uint32_t k() const { return k_; }
  float threshold() const { return threshold_; }
  std::size_t size() const { return count_; }
  std::size_t capacity() const { return capacity_; }
  bool over_capacity() const { return count_ > capacity_; }
  const float* values() const { return values_.data(); }
  const std::uint32_t* tokens() const { return tokens_.data(); }

  // Where the SIMD kernel appends admitted entries; it then calls added(n).
  float* value_tail() { return values_.data() + count_; }
  std::uint32_t* token_tail() { return tokens_.data() + count_; }
  void added(std::size_t n) {
    count_ += n;
    admitted_since_seed_check_ += n;
  }

  // Scalar admission (merging chunk survivors). Requires tokens ascending across calls.
  void admit(float value, std::uint32_t token) {
    if (!(value > threshold_)) return;
    values_[count_] = value;
    tokens_[count_] = token;
    ++count_;
    if (count_ > capacity_) compact();
  }

  // Keeps the K best (value descending, token ascending), in token order, and raises the
  // threshold to the K-th best value when K entries remain.
  void compact();

  // Ascending rows defeat a running threshold: every entry beats the K-th best so far. When a
  // chunk has admitted far more than a random row would (see kernel), the kernel asks for a seed
  // from the entries not yet scanned, [ahead, ahead + n): with t the K-th largest candidate among
  // the last entries of that range, at least K entries >= t are still to come and each will be
  // admitted (the threshold becomes the float just below t), so everything below t is beaten by K
  // of them and may be rejected. Done at most once per chunk (start_chunk re-arms it).
  void start_chunk(std::uint64_t chunk_size);
  bool wants_seed() const { return !seeded_ && admitted_since_seed_check_ > seed_budget_; }
  void seed_from_ahead(const float* ahead, std::uint64_t n);

 private:
  std::uint32_t k_ = 0;
  float threshold_ = -std::numeric_limits<float>::infinity();
  std::size_t count_ = 0;
  std::size_t capacity_ = 0;
  std::vector<float> values_;
  std::vector<std::uint32_t> tokens_;
  std::vector<float> scratch_;        // seed sample
  std::vector<std::uint32_t> keys_;   // selection workspace

  float kth_largest(const float* values, std::size_t n, std::size_t k);
  bool seeded_ = false;
  std::uint64_t admitted_since_seed_check_ = 0;
  std::uint64_t seed_budget_ = 0;
};

}  // namespace logprobs::cpu
