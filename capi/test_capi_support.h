/* What the C tests of the C API share: a check that counts failures per caller (threads keep
 * their own count), and small batches. */
#ifndef LOGPROBS_TEST_CAPI_SUPPORT_H
#define LOGPROBS_TEST_CAPI_SUPPORT_H

#include <stdio.h>

#include "logprobs/logprobs.h"

#define CHECK(failures, condition)                                                  \
  do {                                                                              \
    if (!(condition)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      ++(failures);                                                                 \
    }                                                                               \
  } while (0)

/* Two batch items, V = 5, one logit row and one output row each (SPEC §1's simplest shape). */
typedef struct small_batch {
  float logits[10];
  uint32_t sampled[2];
  uint32_t offsets[3];
  uint32_t token_offsets[3];
  logprobs_batch_view view;
} small_batch;

void small_batch_init(small_batch* b);

/* The API's calls from several threads at once; returns the failures seen. */
int run_thread_checks(void);

#endif
