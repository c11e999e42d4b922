/* The C API from several threads at once: each draws its own random batches (the generators'
 * lock), runs the reference and a backend on them and judges the result, and meets its own error,
 * whose message names its own values: no call sees another thread's state. */
#define _POSIX_C_SOURCE 200809L /* pthreads */

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_capi_support.h"

enum { kThreads = 4, kRounds = 6 };

typedef struct thread_work {
  int index;
  int failures;
} thread_work;

static int32_t fails_with_two_items(const logprobs_batch_view* candidate, void* unused) {
  (void)unused;
  return candidate->batch_size >= 2;
}

static void* work(void* argument) {
  thread_work* w = (thread_work*)argument;
  int round;
  for (round = 0; round < kRounds; ++round) {
    const uint64_t seed = (uint64_t)(w->index * 1000 + round);
    const uint32_t k = round % 2 == 0 ? 7 : 20;
    logprobs_batch* batch = NULL;
    logprobs_batch* smallest = NULL;
    logprobs_batch_view view;
    logprobs_result* result = NULL;
    logprobs_result_view result_view;
    logprobs_verdict* verdict = NULL;
    int32_t steps = 0;
    CHECK(w->failures, logprobs_random_batch(seed, 40 + round * 10, NULL, &batch, NULL) == LOGPROBS_OK);
    logprobs_batch_get_view(batch, &view);
    /* "max" implements K = 7 on f32 logits without temperatures (and is judged as one f32 chain);
     * cpu, everything. */
    const int by_max = k == 7 && view.dtype == LOGPROBS_F32 && !view.has_temperatures;
    if (by_max) {
      CHECK(w->failures, logprobs_run("max", &view, k, 0, &result, NULL) == LOGPROBS_OK);
    } else {
      CHECK(w->failures, logprobs_run("cpu", &view, k, 1, &result, NULL) == LOGPROBS_OK);
    }
    logprobs_result_get_view(result, &result_view);
    {
      logprobs_tolerance tolerance;
      logprobs_tolerance_default(&tolerance);
      tolerance.sum_rule = by_max ? LOGPROBS_SUM_LINEAR : LOGPROBS_SUM_CALIBRATED;
      CHECK(w->failures, logprobs_judge(&view, k, &result_view, &tolerance, &verdict, NULL) == LOGPROBS_OK);
    }
    CHECK(w->failures, logprobs_verdict_ok(verdict));
    logprobs_verdict_free(verdict);
    logprobs_result_free(result);
    logprobs_batch_free(batch);

    CHECK(w->failures, logprobs_find_counterexample(seed, 60, NULL, fails_with_two_items, NULL, 500, &smallest, &steps,
                                                    NULL) == LOGPROBS_OK);
    if (smallest != NULL) {
      logprobs_batch_get_view(smallest, &view);
      CHECK(w->failures, view.batch_size == 2);
      logprobs_batch_free(smallest);
    }

    {
      small_batch b;
      logprobs_error* error = NULL;
      char expected[64];
      small_batch_init(&b);
      b.sampled[0] = 100 + (uint32_t)w->index; /* out of range, and this thread's own value */
      CHECK(w->failures, logprobs_reference(&b.view, 3, 0, &result, &error) == LOGPROBS_INVALID_BATCH);
      sprintf(expected, "%u", 100 + (unsigned)w->index);
      CHECK(w->failures, error != NULL && strstr(logprobs_error_message(error), expected) != NULL);
      logprobs_error_free(error);
    }
  }
  return NULL;
}

int run_thread_checks(void) {
  pthread_t threads[kThreads];
  thread_work works[kThreads];
  int i, failures = 0;
  for (i = 0; i < kThreads; ++i) {
    works[i].index = i;
    works[i].failures = 0;
    CHECK(failures, pthread_create(&threads[i], NULL, work, &works[i]) == 0);
  }
  for (i = 0; i < kThreads; ++i) {
    CHECK(failures, pthread_join(threads[i], NULL) == 0);
    failures += works[i].failures;
  }
  return failures;
}
