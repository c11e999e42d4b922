/* The C API end to end, from C: backends, the reference, judging either layout (planted faults
 * fail under their rule), errors as a status and a message per call, random batches and
 * shrinking through a C callback, files; then the same calls from several threads.
 * Over 400 lines: every function of the API checked from C in one program, each call beside the
 * calls whose results it needs (a verdict's violations and diagnoses beside the judging).
 *
 *     test_capi WORK_DIR     exit 0 when every check passes
 */
#define _POSIX_C_SOURCE 200809L /* mkdir */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_capi_support.h"

static int failures = 0;

void small_batch_init(small_batch* b) {
  static const float logits[10] = {1, 3, 2, 3, -1, 0, 0, 0, 0, 5};
  memset(b, 0, sizeof *b);
  memcpy(b->logits, logits, sizeof logits);
  b->sampled[0] = 2;
  b->sampled[1] = 4;
  b->offsets[1] = 1;
  b->offsets[2] = 2;
  b->view.logits = b->logits;
  b->view.dtype = LOGPROBS_F32;
  b->view.rows = 2;
  b->view.vocab = 5;
  b->view.row_stride = 5;
  b->view.sampled_tokens = b->sampled;
  b->view.batch_size = 2;
  b->view.logit_row_offsets = b->offsets;
  b->view.logit_row_offsets_count = 3;
  b->view.token_row_offsets = b->token_offsets;
  b->view.token_row_offsets_count = 3;
  b->view.lp_output_offsets = b->offsets;
  b->view.lp_output_offsets_count = 3;
}

/* The status is `want`, the error object the call stored in *slot says so, and its message holds
 * `fragment`. (The object is read here, after the call: not as an argument beside it.) */
static void expect_error(logprobs_status status, logprobs_error** slot, logprobs_status want, const char* fragment) {
  logprobs_error* error = *slot;
  *slot = NULL;
  CHECK(failures, status == want);
  CHECK(failures, error != NULL);
  if (error == NULL) return;
  CHECK(failures, logprobs_error_status(error) == want);
  if (strstr(logprobs_error_message(error), fragment) == NULL)
    fprintf(stderr, "message '%s' lacks '%s' (%s)\n", logprobs_error_message(error), fragment,
            logprobs_status_name(status));
  CHECK(failures, strstr(logprobs_error_message(error), fragment) != NULL);
  logprobs_error_free(error);
}

/* The verdict on `got`, with the rule of its first violation (-1 when it agrees). */
static int32_t first_rule(const logprobs_batch_view* batch, uint32_t k, const logprobs_result_view* got) {
  logprobs_verdict* verdict = NULL;
  logprobs_violation violation;
  int32_t rule = -1;
  CHECK(failures, logprobs_judge(batch, k, got, NULL, &verdict, NULL) == LOGPROBS_OK);
  if (logprobs_verdict_violation_count(verdict) > 0) {
    CHECK(failures, logprobs_verdict_violation(verdict, 0, &violation, NULL) == LOGPROBS_OK);
    rule = violation.rule;
    CHECK(failures, strcmp(violation.rule_name, logprobs_rule_name(rule)) == 0);
    CHECK(failures, strstr(violation.message, violation.what) != NULL);
    /* Its row's summation term, by the default calibrated rule: at least the floor, 8 x 2^-24 (a
     * shape violation belongs to no row). */
    CHECK(failures, rule == LOGPROBS_RULE_SHAPE ||
                        (violation.sum_rule == LOGPROBS_SUM_CALIBRATED && violation.dev >= 0 &&
                         violation.sum_err >= 8.0 / 16777216.0 && violation.sum_err >= 2 * violation.dev));
  }
  CHECK(failures, logprobs_verdict_ok(verdict) == (rule == -1));
  logprobs_verdict_free(verdict);
  return rule;
}

/* The verdict on `got` has one diagnosis, `name`, on output row `row` alone (name NULL: none). */
static void expect_diagnosis(const logprobs_batch_view* batch, uint32_t k, const logprobs_result_view* got,
                             const char* name, uint64_t row) {
  logprobs_verdict* verdict = NULL;
  logprobs_diagnosis d;
  logprobs_error* error = NULL;
  uint64_t count;
  CHECK(failures, logprobs_judge(batch, k, got, NULL, &verdict, NULL) == LOGPROBS_OK);
  count = logprobs_verdict_diagnosis_count(verdict);
  CHECK(failures, count == (name == NULL ? 0u : 1u) && logprobs_verdict_diagnosis_count(NULL) == 0);
  if (name != NULL && count == 1) {
    CHECK(failures, logprobs_verdict_diagnosis(verdict, 0, &d, NULL) == LOGPROBS_OK && strcmp(d.name, name) == 0);
    CHECK(failures, d.row_count == 1 && d.rows[0] == row && strlen(d.evidence) > 20 &&
                        strncmp(d.message, name, strlen(name)) == 0 && strstr(d.message, d.evidence) != NULL);
  }
  expect_error(logprobs_verdict_diagnosis(verdict, count, &d, &error), &error, LOGPROBS_INVALID_ARGUMENT, "past the end");
  expect_error(logprobs_verdict_diagnosis(verdict, 0, NULL, &error), &error, LOGPROBS_INVALID_ARGUMENT,
               name == NULL ? "past the end" : "diagnosis is NULL");
  logprobs_verdict_free(verdict);
}

static void backends(void) {
  logprobs_backend_list* list = NULL;
  logprobs_backend_info info;
  uint64_t i, count;
  int saw_max = 0;
  CHECK(failures, logprobs_backends(&list, NULL) == LOGPROBS_OK);
  count = logprobs_backend_list_count(list);
  CHECK(failures, count >= 2);
  CHECK(failures, logprobs_backend_list_get(list, 0, &info, NULL) == LOGPROBS_OK);
  CHECK(failures, strcmp(info.name, "reference") == 0 && info.available && info.any_k && info.ranks);
  for (i = 0; i < count; ++i) {
    CHECK(failures, logprobs_backend_list_get(list, i, &info, NULL) == LOGPROBS_OK);
    if (strcmp(info.name, "max") == 0) {
      saw_max = 1;
      CHECK(failures, info.sums_in_one_chain && !info.any_k && !info.ranks && !info.bf16_logits);
    }
  }
  CHECK(failures, saw_max);
  {
    logprobs_error* error = NULL;
    expect_error(logprobs_backend_list_get(list, count, &info, &error), &error, LOGPROBS_INVALID_ARGUMENT,
                 "past the end");
  }
  logprobs_backend_list_free(list);
}

static void reference_and_judging(void) {
  small_batch b;
  logprobs_result* result = NULL;
  logprobs_result_view packed, split;
  uint64_t rows = 0, width = 0, logit_rows[2];
  uint32_t tokens[2], items[2], top_tokens[6];
  float top_logprobs[6], sampled_logprobs[2], values[8];
  uint32_t lp_tokens[8], ranks[2];
  int row, slot;
  small_batch_init(&b);

  CHECK(failures, logprobs_output_shape(&b.view, 3, &rows, &width, NULL) == LOGPROBS_OK);
  CHECK(failures, rows == 2 && width == 4);
  CHECK(failures, logprobs_plan_rows(&b.view, 2, logit_rows, tokens, items, &rows, NULL) == LOGPROBS_OK);
  CHECK(failures, rows == 2 && logit_rows[1] == 1 && tokens[0] == 2 && tokens[1] == 4 && items[1] == 1);

  CHECK(failures, logprobs_reference(&b.view, 3, 1, &result, NULL) == LOGPROBS_OK);
  logprobs_result_get_view(result, &packed);
  CHECK(failures, packed.layout == LOGPROBS_PACKED && packed.rows == 2 && packed.columns == 4 && packed.has_ranks);
  CHECK(failures, logprobs_result_k(result) == 3);
  CHECK(failures, packed.lp_tokens[3] == 2 && packed.lp_tokens[4] == 4 && packed.lp_tokens[7] == 4);
  CHECK(failures, packed.ranks[0] == 3 && packed.ranks[1] == 1); /* x_j >= x_s: {3, 2, 3}; {5} */
  CHECK(failures, first_rule(&b.view, 3, &packed) == -1);
  expect_diagnosis(&b.view, 3, &packed, NULL, 0); /* a passing verdict: none */

  /* The same result in the split layout agrees too. */
  for (row = 0; row < 2; ++row) {
    for (slot = 0; slot < 3; ++slot) {
      top_tokens[row * 3 + slot] = packed.lp_tokens[row * 4 + slot];
      top_logprobs[row * 3 + slot] = packed.lp_logits[row * 4 + slot];
    }
    sampled_logprobs[row] = packed.lp_logits[row * 4 + 3];
  }
  memset(&split, 0, sizeof split);
  split.layout = LOGPROBS_SPLIT;
  split.rows = 2;
  split.columns = 3;
  split.top_tokens = top_tokens;
  split.top_logprobs = top_logprobs;
  split.sampled_logprobs = sampled_logprobs;
  CHECK(failures, first_rule(&b.view, 3, &split) == -1);

  /* Planted faults, each under its rule. */
  top_logprobs[0] += 0.5f; /* token 1 or 3, not the evaluated token 2 */
  CHECK(failures, first_rule(&b.view, 3, &split) == LOGPROBS_RULE_VALUE);
  top_logprobs[0] -= 0.5f;
  sampled_logprobs[0] += 0.5f; /* token 2 is also a top token: its two values differ */
  CHECK(failures, first_rule(&b.view, 3, &split) == LOGPROBS_RULE_GREEDY_EXACT); /* checked before values */
  sampled_logprobs[0] -= 0.5f;
  top_tokens[0] = top_tokens[1]; /* a duplicate */
  CHECK(failures, first_rule(&b.view, 3, &split) == LOGPROBS_RULE_DUPLICATE_TOKEN);

  memcpy(values, packed.lp_logits, sizeof values);
  memcpy(lp_tokens, packed.lp_tokens, sizeof lp_tokens);
  memcpy(ranks, packed.ranks, sizeof ranks);
  packed.lp_logits = values;
  packed.lp_tokens = lp_tokens;
  packed.ranks = ranks;
  ranks[0] = 2; /* counted with > instead of >= */
  CHECK(failures, first_rule(&b.view, 3, &packed) == LOGPROBS_RULE_RANK);
  expect_diagnosis(&b.view, 3, &packed, "rank_strict", 0);
  ranks[0] = 3;
  lp_tokens[3] = 1;
  CHECK(failures, first_rule(&b.view, 3, &packed) == LOGPROBS_RULE_LAST_TOKEN);
  lp_tokens[3] = 2;
  packed.rows = 1; /* too few rows: a shape violation, not an error */
  CHECK(failures, first_rule(&b.view, 3, &packed) == LOGPROBS_RULE_SHAPE);
  packed.rows = 2;

  { /* Every token out of range: all counted (a row: last_token, 3 token_range), 2 kept, then none. */
    logprobs_verdict* verdict = NULL;
    logprobs_violation first;
    uint32_t saved[8];
    memcpy(saved, lp_tokens, sizeof saved);
    for (int i = 0; i < 8; ++i) lp_tokens[i] = 9;
    CHECK(failures, logprobs_judge_keeping(&b.view, 3, &packed, NULL, 2, &verdict, NULL) == LOGPROBS_OK &&
                        !logprobs_verdict_ok(verdict) && logprobs_verdict_violation_count(verdict) == 2 &&
                        logprobs_verdict_violations_found(verdict) == 8 &&
                        logprobs_verdict_rule_count(verdict, LOGPROBS_RULE_TOKEN_RANGE) == 6 &&
                        logprobs_verdict_rule_count(verdict, LOGPROBS_RULE_LAST_TOKEN) == 2 &&
                        logprobs_verdict_rule_count(verdict, 99) == 0);
    CHECK(failures, logprobs_verdict_violation(verdict, 0, &first, NULL) == LOGPROBS_OK &&
                        first.rule == LOGPROBS_RULE_LAST_TOKEN && first.output_row == 0 &&
                        logprobs_verdict_violation(verdict, 2, &first, NULL) == LOGPROBS_INVALID_ARGUMENT);
    logprobs_verdict_free(verdict);
    CHECK(failures, logprobs_judge_keeping(&b.view, 3, &packed, NULL, 0, &verdict, NULL) == LOGPROBS_OK &&
                        !logprobs_verdict_ok(verdict) && logprobs_verdict_violation_count(verdict) == 0);
    logprobs_verdict_free(verdict);
    memcpy(lp_tokens, saved, sizeof saved);
  }

  {
    logprobs_verdict* verdict = NULL;
    logprobs_stats stats;
    logprobs_tolerance tolerance;
    logprobs_error* error = NULL;
    logprobs_tolerance_default(&tolerance);
    CHECK(failures, tolerance.sum_rule == LOGPROBS_SUM_CALIBRATED && tolerance.floor == 8 && tolerance.sigma == 2);
    CHECK(failures, strcmp(logprobs_sum_rule_name(LOGPROBS_SUM_SQRT), "sqrt") == 0);
    CHECK(failures, strcmp(logprobs_sum_rule_name(7), "unknown") == 0);
    tolerance.sigma = 3;
    CHECK(failures, logprobs_judge(&b.view, 3, &packed, &tolerance, &verdict, NULL) == LOGPROBS_OK);
    logprobs_verdict_stats(verdict, &stats);
    CHECK(failures, stats.rows == 2 && stats.values == 8 && stats.tolerance.sigma == 3 && stats.tolerance.ulps == 4);
    CHECK(failures, stats.max_tolerance_used >= 0 && stats.max_tolerance_used <= 1);
    CHECK(failures, stats.max_tolerance_row.found && stats.max_tolerance_row.vocab == 5 &&
                        stats.max_tolerance_row.sum_rule == LOGPROBS_SUM_CALIBRATED &&
                        strstr("confident masked flat spread", stats.max_tolerance_row.kind) != NULL);
    logprobs_verdict_free(verdict);
    tolerance.sum_rule = 3; /* no such rule */
    expect_error(logprobs_judge(&b.view, 3, &packed, &tolerance, &verdict, &error), &error, LOGPROBS_INVALID_ARGUMENT,
                 "sum_rule");
    tolerance.sum_rule = LOGPROBS_SUM_SQRT;
    tolerance.floor = -1;
    expect_error(logprobs_judge(&b.view, 3, &packed, &tolerance, &verdict, &error), &error, LOGPROBS_INVALID_ARGUMENT,
                 "floor");
  }
  logprobs_result_free(result);

  /* max runs K = 3 (2^2 - 1) and agrees, as cpu does with ranks. */
  CHECK(failures, logprobs_run("max", &b.view, 3, 0, &result, NULL) == LOGPROBS_OK);
  logprobs_result_get_view(result, &packed);
  CHECK(failures, first_rule(&b.view, 3, &packed) == -1);
  logprobs_result_free(result);
  CHECK(failures, logprobs_run("cpu", &b.view, 3, 1, &result, NULL) == LOGPROBS_OK);
  logprobs_result_get_view(result, &packed);
  CHECK(failures, packed.has_ranks && first_rule(&b.view, 3, &packed) == -1);
  logprobs_result_free(result);
}

static void errors(void) {
  small_batch b;
  logprobs_error* error = NULL;
  logprobs_result* result = NULL;
  logprobs_verdict* verdict = NULL;
  logprobs_tolerance tolerance;
  logprobs_result_view empty;
  small_batch_init(&b);
  memset(&empty, 0, sizeof empty);

  b.sampled[1] = 5; /* the token V */
  expect_error(logprobs_reference(&b.view, 3, 0, &result, &error), &error, LOGPROBS_INVALID_BATCH, "sampled_tokens");
  CHECK(failures, result == NULL);
  CHECK(failures, logprobs_reference(&b.view, 3, 0, &result, NULL) == LOGPROBS_INVALID_BATCH); /* error NULL */
  b.sampled[1] = 4;
  b.view.tokens_count = 3; /* tokens NULL with a count */
  expect_error(logprobs_reference(&b.view, 3, 0, &result, &error), &error, LOGPROBS_INVALID_ARGUMENT,
               "tokens is NULL but its count is 3");
  b.view.tokens_count = 0;
  expect_error(logprobs_run("nope", &b.view, 3, 0, &result, &error), &error, LOGPROBS_UNKNOWN_BACKEND,
               "known: reference");
  expect_error(logprobs_run("max", &b.view, 5, 0, &result, &error), &error, LOGPROBS_UNSUPPORTED_PART, "K = 5");
  expect_error(logprobs_run(NULL, &b.view, 3, 0, &result, &error), &error, LOGPROBS_INVALID_ARGUMENT,
               "backend is NULL");
  logprobs_tolerance_default(&tolerance);
  tolerance.ulps = NAN;
  expect_error(logprobs_judge(&b.view, 3, &empty, &tolerance, &verdict, &error), &error, LOGPROBS_INVALID_ARGUMENT,
               "ulps must be a finite number");
  empty.layout = 7;
  expect_error(logprobs_judge(&b.view, 3, &empty, NULL, &verdict, &error), &error, LOGPROBS_INVALID_ARGUMENT,
               "layout 7");
  b.view.dtype = 9;
  expect_error(logprobs_output_shape(&b.view, 3, NULL, NULL, &error), &error, LOGPROBS_INVALID_BATCH, "unknown dtype");
  CHECK(failures, strcmp(logprobs_status_name(LOGPROBS_FILE_ERROR), "LOGPROBS_FILE_ERROR") == 0);
  CHECK(failures, strcmp(logprobs_rule_name(99), "unknown") == 0);
}

/* A planted bug for the shrinker: a batch "fails" when V > 100 and it has an output row. */
static int32_t fails_above_100(const logprobs_batch_view* candidate, void* calls) {
  ++*(int*)calls;
  return candidate->vocab > 100 && candidate->lp_output_offsets[candidate->lp_output_offsets_count - 1] > 0;
}

static int32_t stops(const logprobs_batch_view* candidate, void* calls) {
  (void)candidate;
  ++*(int*)calls;
  return -1;
}

static int32_t never_fails(const logprobs_batch_view* candidate, void* calls) {
  (void)candidate;
  ++*(int*)calls;
  return 0;
}

static void random_batches(void) {
  logprobs_batch *a = NULL, *b = NULL, *smallest = NULL;
  logprobs_batch_view va, vb;
  logprobs_random_options options;
  logprobs_error* error = NULL;
  uint64_t seed;
  uint32_t k = 0;
  int calls = 0, found = 0;
  int32_t steps = 0;

  CHECK(failures, logprobs_random_batch(11, 60, NULL, &a, NULL) == LOGPROBS_OK);
  CHECK(failures, logprobs_random_batch(11, 60, NULL, &b, NULL) == LOGPROBS_OK);
  logprobs_batch_get_view(a, &va);
  logprobs_batch_get_view(b, &vb);
  CHECK(failures, va.vocab == vb.vocab && va.rows == vb.rows && va.dtype == vb.dtype && va.batch_size == vb.batch_size);
  CHECK(failures, memcmp(va.logits, vb.logits, va.rows * va.row_stride * (va.dtype == LOGPROBS_F32 ? 4 : 2)) == 0);
  CHECK(failures, logprobs_output_shape(&va, 20, NULL, NULL, NULL) == LOGPROBS_OK);
  logprobs_batch_free(a);
  logprobs_batch_free(b);

  logprobs_random_options_default(&options);
  options.vocab = 1000;
  options.dtype = LOGPROBS_BF16;
  options.temperatures = 1;
  CHECK(failures, logprobs_random_batch(5, 100, &options, &a, NULL) == LOGPROBS_OK);
  logprobs_batch_get_view(a, &va);
  CHECK(failures, va.vocab == 1000 && va.dtype == LOGPROBS_BF16 && va.has_temperatures);
  logprobs_batch_free(a);
  options.vocab = 0;
  options.dtype = 3;
  expect_error(logprobs_random_batch(5, 100, &options, &a, &error), &error, LOGPROBS_INVALID_ARGUMENT, "dtype 3");
  expect_error(logprobs_random_batch(5, 101, NULL, &a, &error), &error, LOGPROBS_INVALID_ARGUMENT, "size 101");
  CHECK(failures, logprobs_random_k(3, &k, NULL) == LOGPROBS_OK && k <= 65535);

  /* The first seed that shows the planted bug shrinks to one batch item of V = 101. */
  for (seed = 1; seed < 200 && !found; ++seed) {
    CHECK(failures, logprobs_find_counterexample(seed, 100, NULL, fails_above_100, &calls, 2000, &smallest, &steps,
                                                 NULL) == LOGPROBS_OK);
    if (smallest != NULL) {
      found = 1;
      logprobs_batch_get_view(smallest, &va);
      CHECK(failures, va.vocab == 101 && va.batch_size == 1 && steps > 0);
      logprobs_batch_free(smallest);
    }
  }
  CHECK(failures, found);
  calls = 0;
  CHECK(failures,
        logprobs_find_counterexample(3, 50, NULL, never_fails, &calls, 100, &smallest, &steps, NULL) == LOGPROBS_OK);
  CHECK(failures, smallest == NULL && calls == 1);
  calls = 0;
  expect_error(logprobs_find_counterexample(3, 50, NULL, stops, &calls, 100, &smallest, &steps, &error), &error,
               LOGPROBS_CALLBACK_FAILED, "negative");
  CHECK(failures, calls == 1 && smallest == NULL);
}

static void files(const char* dir) {
  small_batch b;
  char batch_path[4096], result_path[4096], missing[4096];
  const char* keys[] = {"origin"};
  const char* values[] = {"test_capi"};
  const char *key = NULL, *value = NULL;
  logprobs_batch* loaded = NULL;
  logprobs_result *result = NULL, *loaded_result = NULL;
  logprobs_result_view view;
  logprobs_batch_view loaded_view;
  logprobs_error* error = NULL;
  uint64_t i;
  int saw_origin = 0;
  small_batch_init(&b);
  sprintf(batch_path, "%s/batch.safetensors", dir);
  sprintf(result_path, "%s/result.safetensors", dir);
  sprintf(missing, "%s/missing.safetensors", dir);

  CHECK(failures, logprobs_save_batch(batch_path, &b.view, 3, keys, values, 1, NULL) == LOGPROBS_OK);
  CHECK(failures, logprobs_load_batch(batch_path, &loaded, NULL) == LOGPROBS_OK);
  CHECK(failures, logprobs_batch_k(loaded) == 3);
  for (i = 0; i < logprobs_batch_metadata_count(loaded); ++i) {
    logprobs_batch_metadata(loaded, i, &key, &value);
    saw_origin |= strcmp(key, "origin") == 0 && strcmp(value, "test_capi") == 0;
  }
  CHECK(failures, saw_origin);
  logprobs_batch_get_view(loaded, &loaded_view);
  CHECK(failures, loaded_view.vocab == 5 && memcmp(loaded_view.logits, b.logits, sizeof b.logits) == 0);

  CHECK(failures, logprobs_reference(&loaded_view, 3, 1, &result, NULL) == LOGPROBS_OK);
  logprobs_result_get_view(result, &view);
  CHECK(failures, logprobs_save_result(result_path, &view, NULL, NULL, 0, NULL) == LOGPROBS_OK);
  CHECK(failures, logprobs_load_result(result_path, &loaded_result, NULL) == LOGPROBS_OK);
  logprobs_result_get_view(loaded_result, &view);
  CHECK(failures, view.layout == LOGPROBS_PACKED && view.has_ranks && first_rule(&b.view, 3, &view) == -1);
  logprobs_result_free(loaded_result);
  logprobs_result_free(result);
  logprobs_batch_free(loaded);

  expect_error(logprobs_load_batch(missing, &loaded, &error), &error, LOGPROBS_FILE_ERROR, "missing.safetensors");
  expect_error(logprobs_load_result(batch_path, &loaded_result, &error), &error, LOGPROBS_FILE_ERROR,
               "neither a packed result");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_capi WORK_DIR\n");
    return 2;
  }
  mkdir(argv[1], 0777);
  CHECK(failures, logprobs_api_version() == LOGPROBS_API_VERSION);
  backends();
  reference_and_judging();
  errors();
  random_batches();
  files(argv[1]);
  failures += run_thread_checks();
  printf("test_capi: %s (%d failed checks)\n", failures == 0 ? "OK" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
