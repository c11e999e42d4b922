// The C API's random batches: the generators of fuzz/generators.hpp by (seed, size, options), the
// campaign's hand cases, and RapidCheck's shrinking of a failing one with the caller's predicate.
//
// RapidCheck keeps its implicit parameters (the generator a `*gen` inside gen::exec reads from)
// in process-wide stacks (rapidcheck/detail/ImplicitParam.h), so two threads drawing at once
// would race on them. Every call into RapidCheck here holds one lock, released while a caller's
// predicate runs (so the predicate may call the API, drawing included). The lock and the hand
// cases (built once, then only read) are the library's process-wide objects; neither keeps state
// of the API's.
#include <fmt/format.h>

#include <memory>
#include <mutex>

#include "capi_support.hpp"
#include "fuzz/generators.hpp"
#include "fuzz/hand_cases.hpp"

using namespace logprobs;
using logprobs::capi::Failure;
using logprobs::capi::guarded;
using logprobs::capi::required;

namespace {

constexpr std::uint64_t kMaxRandomVocab = std::uint64_t{1} << 24;

std::mutex& rapidcheck_lock() {
  static std::mutex lock;
  return lock;
}

// Raised inside the predicate when the caller's callback asks to stop.
struct CallbackStopped {};

gen::BatchOptions to_options(const logprobs_random_options* options) {
  logprobs_random_options o;
  logprobs_random_options_default(&o);
  if (options != nullptr) o = *options;
  gen::BatchOptions fixed;
  if (o.dtype != LOGPROBS_ANY) {
    if (o.dtype < LOGPROBS_F32 || o.dtype > LOGPROBS_F16)
      throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("random options: dtype {} is not a logits dtype", o.dtype));
    fixed.dtype = static_cast<LogitsDtype>(o.dtype);
  }
  if (o.vocab != 0) {
    if (o.vocab > kMaxRandomVocab)
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("random options: vocab {} is above {} (the rows would not fit the logit budget)",
                                o.vocab, kMaxRandomVocab));
    fixed.vocab = o.vocab;
  }
  if (o.offsets != LOGPROBS_ANY) {
    if (o.offsets < LOGPROBS_OFFSETS_NO_ECHO || o.offsets > LOGPROBS_OFFSETS_ARBITRARY)
      throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("random options: offsets {} is not a shape", o.offsets));
    fixed.offsets = static_cast<gen::OffsetShape>(o.offsets);
  }
  if (o.temperatures != LOGPROBS_ANY) {
    if (o.temperatures != 0 && o.temperatures != 1)
      throw Failure(LOGPROBS_INVALID_ARGUMENT,
                    fmt::format("random options: temperatures {} is not LOGPROBS_ANY, 0 or 1", o.temperatures));
    fixed.temperatures = o.temperatures == 1;
  }
  fixed.finite = o.finite != 0;
  return fixed;
}

int checked_size(std::int32_t size) {
  if (size < 0 || size > 100) throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("size {} is not in 0..100", size));
  return size;
}

const std::vector<HandCase>& all_hand_cases() {
  static const std::vector<HandCase> cases = hand_cases();
  return cases;
}

logprobs_batch* owned(BatchData&& data) {
  auto batch = std::make_unique<logprobs_batch>();
  batch->data = std::move(data);
  return batch.release();
}

}  // namespace

// The offset shapes keep the generator's order.
static_assert(LOGPROBS_OFFSETS_NO_ECHO == static_cast<int>(gen::OffsetShape::no_echo));
static_assert(LOGPROBS_OFFSETS_ECHO == static_cast<int>(gen::OffsetShape::echo));
static_assert(LOGPROBS_OFFSETS_ARBITRARY == static_cast<int>(gen::OffsetShape::arbitrary));

extern "C" {

void logprobs_random_options_default(logprobs_random_options* options) {
  if (options == nullptr) return;
  *options = {LOGPROBS_ANY, 0, LOGPROBS_ANY, LOGPROBS_ANY, 0};
}

logprobs_status logprobs_random_batch(uint64_t seed, int32_t size, const logprobs_random_options* options,
                                      logprobs_batch** batch, logprobs_error** error) {
  return guarded(error, [&] {
    required(batch, "batch");
    const rc::Gen<BatchData> generator = gen::batch(to_options(options));
    const int checked = checked_size(size);
    BatchData data;
    {
      const std::lock_guard lock(rapidcheck_lock());
      data = generator(rc::Random(seed), checked).value();
    }
    *batch = owned(std::move(data));
  });
}

logprobs_status logprobs_random_k(uint64_t seed, uint32_t* k, logprobs_error** error) {
  return guarded(error, [&] {
    std::uint32_t& out = required(k, "k");
    const std::lock_guard lock(rapidcheck_lock());
    out = gen::k()(rc::Random(seed), 100).value();
  });
}

uint64_t logprobs_hand_case_count(void) { return all_hand_cases().size(); }

logprobs_status logprobs_hand_case(uint64_t index, const char** name, logprobs_batch** batch, logprobs_error** error) {
  return guarded(error, [&] {
    required(batch, "batch") = nullptr;
    const std::vector<HandCase>& cases = all_hand_cases();
    if (index >= cases.size())
      throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("hand case {} of {}", index, cases.size()));
    if (name != nullptr) *name = cases[index].name.c_str();
    BatchData copy = cases[index].batch;
    *batch = owned(std::move(copy));
  });
}

logprobs_status logprobs_find_counterexample(uint64_t seed, int32_t size, const logprobs_random_options* options,
                                             logprobs_fails_fn fails, void* user_data, int32_t max_tries,
                                             logprobs_batch** smallest, int32_t* shrink_steps, logprobs_error** error) {
  return guarded(error, [&] {
    required(smallest, "smallest") = nullptr;
    if (fails == nullptr) throw Failure(LOGPROBS_INVALID_ARGUMENT, "fails is NULL");
    if (max_tries < 1) throw Failure(LOGPROBS_INVALID_ARGUMENT, fmt::format("max_tries {} is below 1", max_tries));
    const rc::Gen<BatchData> generator = gen::batch(to_options(options));
    const int checked = checked_size(size);
    std::unique_lock lock(rapidcheck_lock());
    const auto predicate = [&](const BatchData& candidate) {
      const logprobs_batch_view view = capi::to_view(candidate.view());
      lock.unlock();
      const std::int32_t verdict = fails(&view, user_data);
      lock.lock();
      if (verdict < 0) throw CallbackStopped{};
      return verdict > 0;
    };
    std::optional<gen::Counterexample> found;
    try {
      found = gen::find_counterexample(generator, seed, checked, predicate, max_tries);
    } catch (const CallbackStopped&) {
      throw Failure(LOGPROBS_CALLBACK_FAILED, "the fails callback returned a negative value: the search stopped");
    }
    lock.unlock();
    if (shrink_steps != nullptr) *shrink_steps = found ? found->shrink_steps : 0;
    if (found) *smallest = owned(std::move(found->batch));
  });
}

}  // extern "C"
