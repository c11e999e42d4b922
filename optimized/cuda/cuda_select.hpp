// The top-K selection's pure logic, shared by the kernels (nvcc) and the host model and tests
// (g++): radix keys, the radix-select state machine with its digit schedules, the digit pick,
// the rule that says which keys are selected, and each selected key's output position.
//
// The order is SPEC §8's: the K largest candidates under (value descending, token ascending),
// written in ascending token order. Every caller holds its items in token order (item index
// order is token order), so "token ascending" is "item index ascending", and a key's output
// position is the number of selected items before it.
#pragma once

#include <cstdint>

#include "logprobs/canonical_arithmetic.hpp"

#if defined(__CUDACC__)
#define LOGPROBS_HD __host__ __device__ __forceinline__
#else
#define LOGPROBS_HD inline
#endif

namespace logprobs::cuda_plan {

LOGPROBS_HD float negative_infinity() { return canonical::float_of(0xFF800000u); }
LOGPROBS_HD float quiet_nan() { return canonical::float_of(0x7FC00000u); }

// ---- Radix keys ------------------------------------------------------------------------------

// Order-preserving map of f32 to u32 (larger value, larger key). Key 0 is reserved for entries
// that are never candidates (SPEC §2.7: NaN and -inf), so every candidate key is at least
// 0x00800000 (-FLT_MAX) and at most 0xFF800000 (+inf). -0 takes +0's key: the two are equal
// values, which the order tells apart by token, as the canonical backend's comparison does.
LOGPROBS_HD std::uint32_t radix_key(float x) {
  if (x != x || !(x > negative_infinity())) return 0u;
  std::uint32_t bits = canonical::bits_of(x);
  if (bits == 0x80000000u) bits = 0u;
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

LOGPROBS_HD float value_of_key(std::uint32_t key) {
  return canonical::float_of((key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key);
}

LOGPROBS_HD bool is_candidate_key(std::uint32_t key) { return key != 0u; }

// ---- Which keys are selected ---------------------------------------------------------------

// Every key above gt_bound, plus the first `ties` keys equal to tie_key in item order. Key 0
// (not a candidate) is never above gt_bound.
struct SelectRule {
  std::uint32_t gt_bound;
  std::uint32_t tie_key;
  std::uint32_t ties;
  std::uint32_t selected;  // how many keys the rule selects: min(K, candidates)
};

LOGPROBS_HD bool is_above(const SelectRule& r, std::uint32_t key) { return key > r.gt_bound; }
LOGPROBS_HD bool is_tie(const SelectRule& r, std::uint32_t key) {
  return r.ties != 0u && key == r.tie_key && is_candidate_key(key);
}

// The output position of a key, given how many above keys and tie keys come before it in item
// order, or -1 when it is not selected. Selected keys fill 0 .. selected - 1 in item order.
LOGPROBS_HD std::int64_t emit_position(const SelectRule& r, std::uint32_t key, std::uint64_t above_before,
                                       std::uint64_t ties_before) {
  if (is_above(r, key)) return std::int64_t(above_before + (ties_before < r.ties ? ties_before : r.ties));
  if (is_tie(r, key) && ties_before < r.ties) return std::int64_t(above_before + ties_before);
  return -1;
}

// ---- Radix select: most significant digit first -----------------------------------------

// Digit widths, most significant first. A CTA selecting from its own <= 1024 items uses four
// 8-bit digits (256 shared bins); a row selecting across CTAs uses 11, 11 and 10 bits (2048
// bins), so that three histograms, and no more than two reads of the row, find any threshold.
enum class Digits : std::uint8_t { block, row };

LOGPROBS_HD int digit_levels(Digits d) { return d == Digits::block ? 4 : 3; }
LOGPROBS_HD int digit_bits(Digits d, int level) { return d == Digits::block ? 8 : (level == 2 ? 10 : 11); }
LOGPROBS_HD int digit_shift(Digits d, int level) {
  if (d == Digits::block) return 24 - 8 * level;
  return level == 0 ? 21 : (level == 1 ? 10 : 0);
}
LOGPROBS_HD int digit_bins(Digits d, int level) { return 1 << digit_bits(d, level); }

struct RadixState {
  std::uint32_t prefix;     // digits chosen so far
  std::uint32_t mask;       // which bits of the prefix are chosen
  std::uint32_t remaining;  // keys still to select inside the current bucket
  std::uint32_t k;
  int level;  // the digit the next histogram counts
  Digits digits;
  bool done;
  SelectRule rule;  // final once done
};

LOGPROBS_HD RadixState radix_begin(std::uint32_t k, Digits digits) {
  return {0u, 0u, k, k, 0, digits, k == 0u, {0xFFFFFFFFu, 0u, 0u, 0u}};
}

// Whether a key is in the current histogram (the current bucket), and its digit there.
LOGPROBS_HD bool in_bucket(const RadixState& s, std::uint32_t key) {
  return is_candidate_key(key) && (key & s.mask) == s.prefix;
}
LOGPROBS_HD int digit_of(const RadixState& s, std::uint32_t key) {
  return int((key >> digit_shift(s.digits, s.level)) & std::uint32_t(digit_bins(s.digits, s.level) - 1));
}

// The rule that keeps every key that may still be selected: the current bucket and every key
// above it (all selected keys once done). Pass 2 of the threshold path compacts by it.
LOGPROBS_HD SelectRule kept_rule(const RadixState& s) {
  if (s.done) return s.rule;
  return {s.prefix == 0u ? 0u : s.prefix - 1u, 0u, 0u, 0u};
}

// The bucket holding the remaining-th largest key: its digit, the count in buckets above it,
// and the count in it.
struct DigitPick {
  int digit;
  std::uint32_t above;
  std::uint32_t bucket;
};

// Walks bins top_bin, top_bin - 1, ... (count of them); the bucket is the first where the running
// count reaches `remaining`. `above_before` counts keys in bins above top_bin. One warp lane runs
// this over its share of the bins on the GPU; the host runs it over all of them. Digit -1 when
// the bins hold fewer than `remaining` keys.
LOGPROBS_HD DigitPick pick_digit_in_group(const std::uint32_t* hist, int top_bin, int count, std::uint32_t above_before,
                                          std::uint32_t remaining) {
  std::uint32_t above = above_before;
  for (int i = 0; i < count; ++i) {
    const int bin = top_bin - i;
    if (above + hist[bin] >= remaining) return {bin, above, hist[bin]};
    above += hist[bin];
  }
  return {-1, above, 0u};
}

LOGPROBS_HD DigitPick pick_digit(const std::uint32_t* hist, int bins, std::uint32_t remaining) {
  return pick_digit_in_group(hist, bins - 1, bins, 0u, remaining);
}

// One histogram done: `total` keys were in it (the current bucket), and `pick` was chosen from it
// when total > remaining. Returns the next state; once done, state.rule is final.
LOGPROBS_HD RadixState radix_step(RadixState s, std::uint32_t total, const DigitPick& pick) {
  if (s.done) return s;
  if (total <= s.remaining) {
    // Only on the first histogram (later ones count a bucket holding more than `remaining`):
    // there are no more candidates than K, so all of them are selected.
    s.done = true;
    s.rule = {0u, 0u, 0u, total};
    return s;
  }
  const int shift = digit_shift(s.digits, s.level);
  s.prefix |= std::uint32_t(pick.digit) << shift;
  s.mask |= std::uint32_t(digit_bins(s.digits, s.level) - 1) << shift;
  s.remaining -= pick.above;
  if (pick.bucket == s.remaining) {
    // The whole bucket is selected: exactly the keys >= prefix. prefix >= 1 here, because a
    // bucket at prefix 0 that completes K would hold every candidate, and there are more than K.
    s.done = true;
    s.rule = {s.prefix - 1u, 0u, 0u, s.k};
    return s;
  }
  if (shift == 0) {
    // Every bit chosen: the bucket is one key value; take `remaining` of its copies.
    s.done = true;
    s.rule = {s.prefix, s.prefix, s.remaining, s.k};
    return s;
  }
  ++s.level;
  return s;
}

// ---- A CTA's candidate floor -------------------------------------------------------------

// If tau is the K-th largest of the per-thread maxima, at least K items are >= tau, so the K-th
// largest item is >= tau too and no item below tau can be selected: the select may treat them
// as non-candidates and histogram far fewer keys (the selected set is the same). candidate_floor
// reads a lower bound of the K-th largest key off a finished rule: the tie key when it took
// ties, else one above the bound (1 when it selected all: no filter).
LOGPROBS_HD std::uint32_t candidate_floor(const SelectRule& r) { return r.ties != 0u ? r.tie_key : r.gt_bound + 1u; }
LOGPROBS_HD std::uint32_t filter_key(std::uint32_t key, std::uint32_t floor) { return key >= floor ? key : 0u; }

// A rule found on filtered keys, as a rule on the unfiltered ones, which the emit reads: a filtered
// key is above gt_bound iff the key is above both gt_bound and floor - 1; a tie key is at least the
// floor, so ties are the same.
LOGPROBS_HD SelectRule on_unfiltered_keys(SelectRule r, std::uint32_t floor) {
  if (r.gt_bound < floor - 1u) r.gt_bound = floor - 1u;
  return r;
}

}  // namespace logprobs::cuda_plan
