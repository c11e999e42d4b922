// backend.hpp promises that a backend may be called from several threads at once; SPEC §6 that
// a call's bits do not depend on what else runs. Four callers run different batches on one
// backend at the same time, and each result must equal the bits of the same call made alone on
// one thread. CI runs these under ThreadSanitizer too (preset tsan, label concurrency).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cctype>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <thread>

#include "harness/batch_data.hpp"
#include "harness/host_backends.hpp"

namespace logprobs {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Each caller's K: no top slots, a few, many, and more than V (padding).
constexpr std::uint32_t kCallerKs[] = {0, 7, 255, 4095};
constexpr int kCallers = std::size(kCallerKs);
constexpr int kCallsPerCaller = 3;

// A batch of a few items with random valid offsets and N(0, 2) logits. Row 0 has masked (-inf)
// entries, row 1 a NaN and row 2 a +inf, so the special-value paths run concurrently too. The
// stride padding holds NaN, so a read past V would show in the result.
BatchData make_batch(unsigned seed) {
  std::mt19937 rng(seed);
  BatchData batch;
  batch.vocab = 700 + 97 * seed;
  batch.row_stride = batch.vocab + seed % 3;
  std::uniform_int_distribution<std::uint32_t> rows_per_item(1, 4);
  std::uniform_int_distribution<std::uint32_t> token(0, static_cast<std::uint32_t>(batch.vocab - 1));
  batch.logit_row_offsets = {0};
  batch.token_row_offsets = {0};
  batch.lp_output_offsets = {0};
  const unsigned items = 3 + seed % 3;
  for (unsigned b = 0; b < items; ++b) {
    const std::uint32_t rows = rows_per_item(rng);
    const std::uint32_t outputs = 1 + rng() % rows;
    const std::uint32_t tokens = outputs - 1 + rng() % 2;
    batch.logit_row_offsets.push_back(batch.logit_row_offsets.back() + rows);
    batch.lp_output_offsets.push_back(batch.lp_output_offsets.back() + outputs);
    batch.token_row_offsets.push_back(batch.token_row_offsets.back() + tokens);
    for (std::uint32_t t = 0; t < tokens; ++t) batch.tokens.push_back(token(rng));
    batch.sampled_tokens.push_back(token(rng));
  }
  batch.rows = batch.logit_row_offsets.back();
  batch.logits.assign(batch.rows * batch.row_stride, kNaN);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  for (std::uint64_t i = 0; i < batch.rows; ++i) {
    float* row = batch.row(i);
    for (std::uint64_t j = 0; j < batch.vocab; ++j) row[j] = logit(rng);
  }
  for (std::uint64_t j = 0; j < batch.vocab; j += 5) batch.row(0)[j] = -kInf;
  if (batch.rows > 1) batch.row(1)[token(rng)] = kNaN;
  if (batch.rows > 2) batch.row(2)[token(rng)] = kInf;
  return batch;
}

struct Job {
  BatchData batch;
  std::uint32_t k;
  ResultData alone;  // the result of this call made alone, on one thread
};

std::vector<Job> jobs_computed_alone(const Backend& backend) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Job> jobs;
  for (int caller = 0; caller < kCallers; ++caller) {
    Job job{make_batch(static_cast<unsigned>(caller)), kCallerKs[caller], {}};
    job.alone = run_backend(backend, job.batch, job.k);
    jobs.push_back(std::move(job));
  }
  omp_set_num_threads(saved_threads);
  return jobs;
}

// Starts one std::thread per job; all wait until every one is running, then each calls the
// backend kCallsPerCaller times with `omp_threads` OpenMP threads of its own.
void expect_concurrent_calls_match_alone(const Backend& backend, int omp_threads) {
  const std::vector<Job> jobs = jobs_computed_alone(backend);
  std::vector<std::vector<ResultData>> results(jobs.size());
  std::vector<std::string> errors(jobs.size());
  std::atomic<std::size_t> started{0};
  std::vector<std::thread> callers;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    callers.emplace_back([&, i] {
      omp_set_num_threads(omp_threads);  // per thread: this caller's parallel regions only
      started.fetch_add(1);
      while (started.load() < jobs.size()) std::this_thread::yield();
      try {
        for (int call = 0; call < kCallsPerCaller; ++call)
          results[i].push_back(run_backend(backend, jobs[i].batch, jobs[i].k));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (std::thread& caller : callers) caller.join();

  for (std::size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_EQ(errors[i], "") << "caller " << i;
    for (std::size_t call = 0; call < results[i].size(); ++call) {
      EXPECT_TRUE(same_bits(results[i][call], jobs[i].alone))
          << backend.name() << ": caller " << i << " (K = " << jobs[i].k << ", " << jobs[i].batch.rows << " rows, V "
          << jobs[i].batch.vocab << "), call " << call << " differs from the same call made alone";
    }
  }
}

// Parameterized by backend name, which reads better than a pointer in test names.
class Concurrency : public testing::TestWithParam<std::string> {
 protected:
  const Backend& backend() const { return *find_backend(GetParam()); }
};

TEST_P(Concurrency, FourCallersWithOneOmpThreadEachMatchCallsAlone) {
  expect_concurrent_calls_match_alone(backend(), 1);
}

TEST_P(Concurrency, FourCallersWithOmpTeamsMatchCallsAlone) {
  if (kThreadSanitizer)
    GTEST_SKIP() << "libgomp is not built with ThreadSanitizer, so its teams would be reported falsely; "
                    "the release and asan runs cover this test";
  expect_concurrent_calls_match_alone(backend(), 2);
}

std::vector<std::string> host_backend_names() {
  std::vector<std::string> names;
  for (const Backend* backend : available_host_backends()) names.emplace_back(backend->name());
  return names;
}

std::string backend_test_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(HostBackends, Concurrency, testing::ValuesIn(host_backend_names()),
                         backend_test_name);

}  // namespace
}  // namespace logprobs
