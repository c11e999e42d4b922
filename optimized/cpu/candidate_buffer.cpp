#include "candidate_buffer.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>

#include "candidate_filters.hpp"

namespace logprobs::cpu {

void CandidateBuffer::reset(std::uint32_t k) {
  k_ = k;
  count_ = 0;
  // K = 0: nothing may enter, not even +inf (x > +inf is false for every x).
  threshold_ = k == 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  // Compaction costs O(capacity) and happens once per (capacity - K) admissions; 2K + 64 keeps
  // that a few operations per admitted entry while the threshold rises early in a row (the first
  // `capacity` candidates of a row are all admitted).
  capacity_ = k == 0 ? 0 : 2 * std::size_t{k} + 64;
  if (values_.size() < capacity_ + kSlack) {
    values_.resize(capacity_ + kSlack);
    tokens_.resize(capacity_ + kSlack);
  }
  seeded_ = false;
  compactions_in_chunk_ = 0;
  compactions_close_ = false;
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Radix selection's digits, most significant first: they split the 32-bit key exactly, so two
// keys that match on every digit are equal.
constexpr int kDigitBits[3] = {11, 11, 10};
static_assert(kDigitBits[0] + kDigitBits[1] + kDigitBits[2] == 32);
constexpr std::uint32_t kMaxDigits = 2048;
static_assert((1u << kDigitBits[0]) <= kMaxDigits && (1u << kDigitBits[1]) <= kMaxDigits &&
              (1u << kDigitBits[2]) <= kMaxDigits);

// counts[d] = how many of the n keys have the digit d = (key >> shift) & mask, for d <= mask.
void count_digits(const std::uint32_t* keys, std::size_t n, int shift, std::uint32_t mask, std::uint32_t* counts) {
  // Key i is counted in table i % kTables, and the tables summed: a row's values crowd a few
  // exponents, so neighbouring keys often share a digit, and with one table each increment of
  // that counter waits for the one before it to reach memory and come back (store forwarding,
  // about 5 cycles); four tables keep four increments in flight.
  constexpr std::size_t kTables = 4;
  std::uint32_t tables[kTables][kMaxDigits] = {};
  std::size_t i = 0;
  for (; i + kTables <= n; i += kTables) {
    for (std::size_t t = 0; t < kTables; ++t) ++tables[t][(keys[i + t] >> shift) & mask];
  }
  for (; i < n; ++i) ++tables[0][(keys[i] >> shift) & mask];
  for (std::uint32_t d = 0; d <= mask; ++d) {
    counts[d] = 0;
    for (const auto& table : tables) counts[d] += table[d];
  }
}

}  // namespace

// The k-th largest (1-based) of n non-NaN values.
float CandidateBuffer::kth_largest(const float* values, std::size_t n, std::size_t k) {
  // Quickselect, and from 4096 values on, first the bracket of a sample (fewer passes over them
  // all), and radix selection where it misses. Also for few of many (the speculation's sample of
  // 2000, j = 10 at K = 255): a min-heap of the j best so far cost a compare and branch per value
  // and 3.5-4.5 us a sample, the splits 2.2 (Xeon model 207, best of 2000).
  if (n < 4 * kBracketSample) return select_by_partition(values, n, k);
  float kth;
  return select_in_bracket(values, n, k, &kth, nullptr) ? kth : select_by_radix(values, n, k);
}

// Quickselect: each round splits the live values at a median-of-3 pivot into those above it and
// those below it, one SIMD pass that compresses each vector twice (split_at_pivot), and goes on
// with the side that holds the k-th largest. The scalar partition it replaces stored every value
// at both ends of one buffer and counted as it went, a few cycles a value, where this takes a
// fraction of a cycle: a compaction of 8255 random entries at K = 4095, 3/4 of it three such
// selections (the bracket's ends in its sample of 1024, then the 1.1k in it), 14-15 -> 5-6 us; of
// 72000 at K = 65535 53-55 -> 38-44 us, the bracket's 2.9k now selected by it, not by radix (Xeon
// model 207, best of 300, two runs). Three buffers take turns: the live values' (after the first
// round) and the two sides'.
float CandidateBuffer::select_by_partition(const float* values, std::size_t n, std::size_t k, std::size_t* greater) {
  for (std::vector<float>& part : parts_)
    if (part.size() < n + kSlack) part.resize(n + kSlack);
  const float* live = values;
  std::size_t above_into = 0, below_into = 1, live_in = 2;
  std::size_t dropped_above = 0;  // values left behind above the live ones, so above the k-th
  // Median-of-3 pivots halve random candidates about every round; sorted ones too. Past the
  // expected rounds, something adversarial is going on: nth_element finishes in O(n log n).
  for (int round = 0; n > 16 && round < 48; ++round) {
    const float x = live[0], y = live[n / 2], z = live[n - 1];
    const float pivot = std::max(std::min(x, y), std::min(std::max(x, y), z));
    const SplitCounts split = split_at_pivot(live, n, pivot, parts_[above_into].data(), parts_[below_into].data());
    const std::size_t equal = n - split.above - split.below;
    if (k > split.above && k <= split.above + equal) {
      if (greater != nullptr) *greater = dropped_above + split.above;
      return pivot;
    }
    if (k <= split.above) {
      live = parts_[above_into].data();
      n = split.above;
      std::swap(above_into, live_in);
    } else {
      live = parts_[below_into].data();
      k -= split.above + equal;
      dropped_above += split.above + equal;
      n = split.below;
      std::swap(below_into, live_in);
    }
  }
  small_.assign(live, live + n);
  std::nth_element(small_.begin(), small_.begin() + std::ptrdiff_t(k - 1), small_.end(), std::greater<float>());
  const float kth = small_[k - 1];
  if (greater != nullptr)
    *greater =
        dropped_above + std::size_t(std::count_if(small_.begin(), small_.end(), [kth](float v) { return v > kth; }));
  return kth;
}

// Floyd and Rivest's step: the k-th largest of the n values ranks near k m / n among m of them
// taken at a stride, so two of the sample's order statistics some standard deviations either side
// of that rank bracket it with high odds. One SIMD pass counts the values above the bracket into
// *above and copies those inside it into `out` (about 2.9k of 72k at K = 65535 with m = 1024: 8
// sigma of the sample's rank, times n / m). Whether the bracket holds the k-th largest (above < k
// <= above + inside) is checked, not assumed: it misses with odds of about 1 in 30000 on a row of
// independent entries, and an adversarial order can make it miss, never make it wrong. A bracket
// that reaches down to -inf leaves -inf out: in a masked row (mostly -inf) it copied them all,
// and quickselect ground through them (1 x 128256 with 90% -inf at K = 65535: 88 us a call, 56
// without them). The k-th largest is then a candidate if above + inside >= k, and -inf if not
// (*below_candidates), with every candidate above it.
bool CandidateBuffer::bracket_kth(const float* values, std::size_t n, std::size_t k, std::vector<float>& out,
                                  std::size_t* inside, std::size_t* above, bool* below_candidates) {
  sample_.resize(kBracketSample);
  for (std::size_t i = 0; i < kBracketSample; ++i) sample_[i] = values[(2 * i + 1) * n / (2 * kBracketSample)];
  const double p = double(k) / double(n);
  const double rank = p * kBracketSample, spread = 4.0 * std::sqrt(kBracketSample * p * (1.0 - p)) + 2.0;
  // The bracket's ends: the sample's order statistics at rank -+ spread, or no end past the sample.
  const auto sample_rank = [&](double r) {
    return static_cast<std::size_t>(std::clamp(r, 0.0, double(kBracketSample + 1)));
  };
  const std::size_t top = sample_rank(std::floor(rank - spread)), bottom = sample_rank(std::ceil(rank + spread));
  const float most = top >= 1 ? select_by_partition(sample_.data(), kBracketSample, top) : kInf;
  const float least = bottom <= kBracketSample ? select_by_partition(sample_.data(), kBracketSample, bottom) : -kInf;
  const float lowest_finite = -std::numeric_limits<float>::max();
  if (out.size() < n + kSlack) out.resize(n + kSlack);
  *inside = keep_between(values, n, std::max(least, lowest_finite), most, out.data(), above);
  *below_candidates = least == -kInf && *above + *inside < k;
  return *above < k && k <= *above + *inside;
}

// Quickselect finishes among the bracket's values; where the bracket misses, the caller selects
// by radix. A bracket of 4 kBracketSample values or more is bracketed once more, from a sample
// of its own: near the middle of a row the first bracket is wide (16.5k of 128256 at K = 65535:
// 66 of the sample's 1024 ranks either side), and quickselect on it took about a third of
// cut_of_row's time. Where the inner bracket misses, the outer one serves. On Zen 5, each form's
// calls in turn in one process (the median of 10 rounds' ratios): cut_of_row on a row of 128256
// in L2 at K = 65535 0.75x the time, and 0.71x with split_at_pivot's two vectors an iteration;
// with both, the kernel at K = 65535 0.95x (64 x 128256 f32, 1 and 2 threads) and 0.94x (1 x
// 128256), at K = 16383 0.98x. The radix selection it replaces counted every key in three digit
// passes, each increment a load and store of a counter that a Zipf-like row's crowded exponents
// make wait on the one before.
bool CandidateBuffer::select_in_bracket(const float* values, std::size_t n, std::size_t k, float* kth,
                                        std::size_t* greater) {
  std::size_t inside = 0, above = 0;
  bool below_candidates = false;
  if (!bracket_kth(values, n, k, bracket_, &inside, &above, &below_candidates)) {
    if (!below_candidates) return false;
    *kth = -kInf;  // fewer than k candidates, every one of them above or inside
    if (greater != nullptr) *greater = above + inside;
    return true;
  }
  const float* live = bracket_.data();
  k -= above;
  std::size_t inner = 0, inner_above = 0;
  // (The bracket holds no -inf, so its inner bracket never falls below its candidates.)
  if (inside >= 4 * kBracketSample &&
      bracket_kth(live, inside, k, inner_bracket_, &inner, &inner_above, &below_candidates)) {
    live = inner_bracket_.data();
    inside = inner;
    k -= inner_above;
    above += inner_above;
  }
  std::size_t greater_inside = 0;
  *kth = select_by_partition(live, inside, k, &greater_inside);
  if (greater != nullptr) *greater = above + greater_inside;
  return true;
}

// Radix selection on order keys: three digit passes of 11, 11 and 10 bits, each counting only
// the keys that matched the digits so far. Its work does not depend on the values' order, so it
// takes what a sample's bracket misses; where the bracket holds the k-th largest, the bracket and
// quickselect are faster (at K = 65535, 72000 entries: 53-55 us with radix on the bracket's 2.9k,
// 38-44 us with quickselect).
float CandidateBuffer::select_by_radix(const float* values, std::size_t n, std::size_t k) {
  keys_.resize(n);
  to_order_keys(values, n, keys_.data());
  std::size_t live = n;
  std::uint32_t counts[kMaxDigits];
  int shift = 32;
  for (const int bits : kDigitBits) {
    shift -= bits;
    const std::uint32_t mask = (1u << bits) - 1;
    count_digits(keys_.data(), live, shift, mask, counts);
    std::uint32_t digit = mask;
    for (;; --digit) {  // from the largest digit down; the k-th largest is in the first bucket
      if (counts[digit] >= k) break;  // that reaches k
      k -= counts[digit];
    }
    live = keep_digit(keys_.data(), live, shift, mask, digit);
  }
  return from_order_key(keys_[0]);
}

bool CandidateBuffer::cut_of_row(const float* x, std::size_t n, std::uint32_t k, RowCut* cut) {
  float kth;
  std::size_t greater;
  if (!select_in_bracket(x, n, k, &kth, &greater)) return false;
  // Fewer than K candidates: kth is -inf, and the cut is every candidate (the rest are padding).
  *cut = {kth, kth > -kInf ? k - greater : 0};
  return true;
}

void CandidateBuffer::append(const float* values, const std::uint32_t* tokens, std::size_t n) {
  if (count_ + n > capacity_) compact();  // then count_ + n <= 2K < capacity_ (n <= K)
  std::copy_n(values, n, values_.data() + count_);
  std::copy_n(tokens, n, tokens_.data() + count_);
  count_ += n;
}

void CandidateBuffer::compact() {
  if (count_ <= k_) return;
  // Entries are never NaN (admission is x > threshold), so the order keys are a total order.
  const float kth = kth_largest(values_.data(), count_, k_);
  // Keep everything at or above the K-th value: K entries when every tie is kept (the common
  // case), and at least K. If more, the total order's tie-break keeps the first of the entries
  // equal to it in token order: the last kept - K of them go, with the entries above it kept
  // between them (entries below it are gone already). Both steps are SIMD, the filters branch-free:
  // on random candidates a compare per entry would mispredict half the time, and 16-bit logits
  // tie at the K-th value on nearly every compaction at large K (bf16, K = 65535: the scalar
  // tie loop this replaced was a third of the time).
  std::size_t kept = keep_at_least(values_.data(), tokens_.data(), count_, kth);
  if (kept > k_) {
    const std::size_t first_dropped = last_ties_start(values_.data(), kept, kth, kept - k_);
    kept = first_dropped +
           keep_above(values_.data() + first_dropped, tokens_.data() + first_dropped, kept - first_dropped, kth);
  }
  count_ = kept;
  threshold_ = kth;
  ++compactions_in_chunk_;
}

void CandidateBuffer::start_chunk() {
  seeded_ = k_ == 0;
  compactions_in_chunk_ = 0;
  compactions_close_ = false;
}

void CandidateBuffer::compact_at(std::uint64_t position) {
  const bool after_one = compactions_in_chunk_ > 0;
  compact();
  compactions_close_ |= after_one && position - last_compaction_at_ <= 4 * (std::uint64_t{k_} + 64);
  last_compaction_at_ = position;
}

void CandidateBuffer::seed_from_ahead(const RowSource& row, std::uint64_t begin, std::uint64_t n) {
  seeded_ = true;
  // The last entries of the range: for ascending rows they are the largest, so t is exact.
  const std::uint64_t sample = std::min<std::uint64_t>(n, std::max<std::uint64_t>(2 * std::uint64_t{k_}, 256));
  scratch_.clear();
  for (std::uint64_t i = begin + n - sample; i < begin + n; ++i) {
    const float v = row.at(i);
    if (v > -std::numeric_limits<float>::infinity()) scratch_.push_back(v);  // candidates only
  }
  if (scratch_.size() < k_) return;
  // Just below t, so that entries equal to t are still admitted (t may be the K-th best itself).
  const float below_t = std::nextafter(kth_largest(scratch_.data(), scratch_.size(), k_),
                                       -std::numeric_limits<float>::infinity());
  threshold_ = std::max(threshold_, below_t);
}

CandidateBuffer::SamplePlan CandidateBuffer::sample_plan(std::uint32_t k, std::uint64_t vocab) {
  if (k < kSpeculationFromK || vocab < kSampleRun) return {};  // small K: few admissions anyway
  // The sample's entries that beat the row's K-th best number about lambda = m K / V (Poisson);
  // t is the j-th largest, j three standard deviations above lambda, so that fewer than K (a
  // rescan, which doubles the row's cost) has odds below 1 in 300 on a row of independent
  // entries; about V j / m entries are then admitted (1.4 K at K = 4095, 2.7 K at K = 255).
  const std::uint64_t lines = (vocab - kSampleRun) / kSampleStride + 1;
  const std::uint64_t m = lines * kSampleRun;
  const double lambda = double(m) * k / double(vocab);
  const std::uint64_t j = static_cast<std::uint64_t>(lambda + 3.0 * std::sqrt(lambda)) + 1;
  // The entries of a line are alike in a sorted row, and there its top j may be one line's:
  // fewer than K entries beat them, always. So t is also at most the L-th largest line maximum,
  // L = ceil((K + run) / stride) + 1: where the entries >= t form one run of tokens (a sorted or
  // single-peaked row), L sampled lines meet the run, which then reaches from the first one's
  // last entry at latest to the last one's first entry at earliest: (L - 1) strides - run + 2
  // >= K entries. For a random row this bound lies far above the j-th largest entry (L = 2
  // against j = 11 at K = 255) and changes nothing.
  const std::uint64_t l = (k + kSampleRun + kSampleStride - 1) / kSampleStride + 1;
  if (m < 4 * j || lines < 4 * l) return {};  // the sample would say little; V is near K
  return {lines, j, l};
}

void CandidateBuffer::threshold_from_maxima(const float* maxima, std::size_t n) {
  assert(count_ == 0 && k_ >= 1 && k_ <= n);  // nothing admitted yet: the threshold may go down
  // nth_element, not kth_largest: among a row's 126 maxima (V = 128256) its SIMD splits took
  // 0.3-0.5 us of a decode step's 22-24, this 0.2.
  scratch_.assign(maxima, maxima + n);
  std::nth_element(scratch_.begin(), scratch_.begin() + (k_ - 1), scratch_.end(), std::greater<float>());
  threshold_ = std::nextafter(scratch_[k_ - 1], -std::numeric_limits<float>::infinity());
}

float CandidateBuffer::speculative_threshold(const RowSource& row, std::uint64_t vocab) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  const auto [lines, j, l] = sample_plan(k_, vocab);
  if (lines == 0) return kNone;
  const std::uint64_t m = lines * kSampleRun;
  // The sampled entries by SIMD (a compress per line where a scalar loop stored and counted each
  // entry: the two loops alone, 1.7 -> 0.4 us a row of 128256 in L2), straight from an f32 row,
  // else from the lines first read into scratch as x.
  scratch_.resize(lines + 2 * (m + kSlack));
  float* const line_max = scratch_.data();
  float* const sampled = line_max + lines;
  float* const near_top = sampled + m + kSlack;  // those that can hold the j largest
  std::size_t kept;
  if (row.plain()) {
    kept = sample_lines(row.plain_row(), kSampleStride, kSampleRun, lines, sampled, line_max);
  } else {
    for (std::uint64_t line = 0; line < lines; ++line) {
      // Lines a page apart lie out of the hardware prefetchers' reach (as in sample_lines).
      if (line + 8 < lines) __builtin_prefetch(row.entry((line + 8) * kSampleStride));
      row.read(line * kSampleStride, kSampleRun, sampled + line * kSampleRun);
    }
    kept = sample_lines(sampled, kSampleRun, kSampleRun, lines, sampled, line_max);
  }
  if (kept < j) return kNone;
  float jth;
  if (4 * j <= lines) {
    // The j lines of the largest maxima hold j entries >= the j-th largest maximum b, so the j-th
    // largest entry is >= b, and is the j-th largest of those >= b: a dozen at K = 255, where
    // selecting among all 2000 took 1 us. Where j is not small against the lines (K >= 2048 at
    // V = 128256), b would leave most of them, and costs a selection more.
    const float b = kth_largest(line_max, lines, j);
    std::size_t above = 0;
    const std::size_t n = keep_between(sampled, kept, b, std::numeric_limits<float>::infinity(), near_top, &above);
    jth = kth_largest(near_top, n, j);
  } else {
    jth = kth_largest(sampled, kept, j);
  }
  const float t = std::min(kth_largest(line_max, lines, l), jth);
  return std::nextafter(t, kNone);
}

}  // namespace logprobs::cpu
