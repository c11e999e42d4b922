/* The C API of logprobs-harness (liblogprobs_c.so): the one way in for a language with a C FFI
 * (Python's ctypes, Mojo, Rust, Julia). It describes batches and results by pointers into the
 * caller's memory, runs the backends and the reference, judges any implementation's result under
 * SPEC §5 and §6, draws random batches from the generators (and shrinks a failing one), and reads
 * and writes the SPEC §7 files.
 *
 * Rules that hold for every function:
 * - No C++ exception or type crosses it. A fallible function returns a logprobs_status; when it is
 *   not LOGPROBS_OK and `error` is not NULL, *error receives an error object (its code and
 *   message) that the caller frees with logprobs_error_free. No message is kept anywhere else.
 * - No mutable global state: everything a call returns lives in the objects it hands out. So any
 *   function may be called from several threads at once, on distinct objects or on the same
 *   object read-only (every function that takes a `const` handle only reads it). The one
 *   process-wide object is a lock around the calls into RapidCheck, whose implicit parameters
 *   are process-wide (capi/capi_random.cpp); it is released while a caller's callback runs.
 * - Arrays are described by a pointer and an element count; a pointer may be NULL only with a
 *   count of 0. Pointers handed out (strings, arrays) borrow from the object they came from and
 *   stay valid until it is freed.
 * - This header is C89 and C99 (it compiles as both in the tests) and C++.
 */
#ifndef LOGPROBS_LOGPROBS_H
#define LOGPROBS_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LOGPROBS_API __attribute__((visibility("default")))
#else
#define LOGPROBS_API
#endif

/* The API's version: it changes whenever a declaration here changes meaning or layout. A caller
 * compares logprobs_api_version() with the LOGPROBS_API_VERSION it was written against. */
#define LOGPROBS_API_VERSION 4
LOGPROBS_API uint32_t logprobs_api_version(void);

/* ---- Errors ------------------------------------------------------------------------------ */

typedef int32_t logprobs_status;
#define LOGPROBS_OK 0
#define LOGPROBS_INVALID_ARGUMENT 1 /* a NULL pointer with a count, a bad option, an index past the end */
#define LOGPROBS_INVALID_BATCH 2    /* the batch or K breaks SPEC §4 */
#define LOGPROBS_UNSUPPORTED_PART 3 /* the backend lacks an optional part the batch needs (SPEC §4) */
#define LOGPROBS_UNKNOWN_BACKEND 4  /* no backend of that name in this build */
#define LOGPROBS_UNAVAILABLE 5      /* the backend cannot run here (no GPU, no such CPU target) */
#define LOGPROBS_FILE_ERROR 6       /* a file that cannot be read or written, or is malformed */
#define LOGPROBS_OUT_OF_MEMORY 7
#define LOGPROBS_CALLBACK_FAILED 8 /* a caller's callback asked to stop */
#define LOGPROBS_INTERNAL_ERROR 9  /* a bug in the harness: the message says where */

typedef struct logprobs_error logprobs_error;
LOGPROBS_API logprobs_status logprobs_error_status(const logprobs_error* error);
LOGPROBS_API const char* logprobs_error_message(const logprobs_error* error);
LOGPROBS_API void logprobs_error_free(logprobs_error* error);
/* The name of a status ("LOGPROBS_INVALID_BATCH"); "unknown" for another value. */
LOGPROBS_API const char* logprobs_status_name(logprobs_status status);

/* ---- Batches (SPEC §1) ------------------------------------------------------------------- */

#define LOGPROBS_F32 0
#define LOGPROBS_BF16 1
#define LOGPROBS_F16 2

/* A ragged batch in the caller's memory, as SPEC §1 lays it out. B is batch_size, the length of
 * sampled_tokens; each offset array should hold B + 1 entries (SPEC §4 reports when one does
 * not). The logits are rows * row_stride elements of `dtype` (2 bytes for bf16 and f16, as bit
 * patterns), of which the first `vocab` of a row count. */
typedef struct logprobs_batch_view {
  const void* logits;
  int32_t dtype; /* LOGPROBS_F32, LOGPROBS_BF16 or LOGPROBS_F16 */
  uint64_t rows;
  uint64_t vocab;
  uint64_t row_stride;
  const uint32_t* tokens;
  uint64_t tokens_count;
  const uint32_t* sampled_tokens;
  uint64_t batch_size;
  const uint32_t* logit_row_offsets;
  uint64_t logit_row_offsets_count;
  const uint32_t* token_row_offsets;
  uint64_t token_row_offsets_count;
  const uint32_t* lp_output_offsets;
  uint64_t lp_output_offsets_count;
  int32_t has_temperatures; /* nonzero: temperatures [temperatures_count] apply (SPEC §2.5) */
  const float* temperatures;
  uint64_t temperatures_count;
} logprobs_batch_view;

/* A batch the API owns (drawn, shrunk or read from a file). */
typedef struct logprobs_batch logprobs_batch;
/* Its view, borrowing the batch's memory. */
LOGPROBS_API void logprobs_batch_get_view(const logprobs_batch* batch, logprobs_batch_view* view);
/* K from the file's metadata ("k", or "levels" L as 2^L - 1); -1 when it had none. */
LOGPROBS_API int64_t logprobs_batch_k(const logprobs_batch* batch);
LOGPROBS_API void logprobs_batch_free(logprobs_batch* batch);

/* SPEC §4: whether the batch and K are valid; on success *rows is N and *width is W = K + 1 (the
 * output shape). Either out-pointer may be NULL. */
LOGPROBS_API logprobs_status logprobs_output_shape(const logprobs_batch_view* batch, uint32_t k, uint64_t* rows,
                                                   uint64_t* width, logprobs_error** error);

/* SPEC §2 steps 1-4 for a valid batch: for each output row o < capacity, the logit row it reads,
 * its evaluated token and its batch item. *count receives N. Any array may be NULL. */
LOGPROBS_API logprobs_status logprobs_plan_rows(const logprobs_batch_view* batch, uint64_t capacity,
                                                uint64_t* logit_rows, uint32_t* tokens, uint32_t* batch_items,
                                                uint64_t* count, logprobs_error** error);

/* ---- Results (SPEC §1, §7) --------------------------------------------------------------- */

#define LOGPROBS_PACKED 0 /* lp_logits, lp_tokens [rows, W]: what MAX and the backends emit */
#define LOGPROBS_SPLIT 1  /* top_tokens, top_logprobs [rows, K], sampled_logprobs [rows]: vLLM's */

/* A result in the caller's memory, in either layout. `columns` is W = K + 1 for the packed
 * layout and K for the split one; every [rows, columns] array holds rows * columns elements and
 * every [rows] array rows elements. The arrays of the other layout are ignored. */
typedef struct logprobs_result_view {
  int32_t layout;
  uint64_t rows;
  uint64_t columns;
  const float* lp_logits;
  const uint32_t* lp_tokens;
  const uint32_t* top_tokens;
  const float* top_logprobs;
  const float* sampled_logprobs;
  int32_t has_ranks;     /* nonzero: ranks [rows] (lp_ranks, or the split layout's sampled_ranks) */
  const uint32_t* ranks; /* SPEC §2.9 */
} logprobs_result_view;

/* A result the API owns (from a backend, the reference or a file). */
typedef struct logprobs_result logprobs_result;
LOGPROBS_API void logprobs_result_get_view(const logprobs_result* result, logprobs_result_view* view);
/* K from a file's metadata; -1 when it had none. */
LOGPROBS_API int64_t logprobs_result_k(const logprobs_result* result);
LOGPROBS_API void logprobs_result_free(logprobs_result* result);

/* ---- Backends (SPEC §4) ------------------------------------------------------------------ */

typedef struct logprobs_backend_info {
  const char* name;
  const char* description;
  int32_t available;
  const char* unavailable_reason; /* "" when available */
  const char* variant_of;         /* the backend whose kernel a variant runs; "" for a backend in its own right */
  /* The optional parts it implements (Backend::features()). */
  int32_t bf16_logits;
  int32_t f16_logits;
  int32_t temperatures;
  int32_t ranks;
  int32_t any_k;             /* a K not of the form 2^L - 1 */
  int32_t sums_in_one_chain; /* judged by the linear sum rule (SPEC §5) */
  int32_t claims_canonical_arithmetic; /* its bits are the canonical backend's (SPEC §8) */
  int32_t computes_on_host;
} logprobs_backend_info;

/* Every backend of this build, in registration order (the reference first). */
typedef struct logprobs_backend_list logprobs_backend_list;
LOGPROBS_API logprobs_status logprobs_backends(logprobs_backend_list** list, logprobs_error** error);
LOGPROBS_API uint64_t logprobs_backend_list_count(const logprobs_backend_list* list);
LOGPROBS_API logprobs_status logprobs_backend_list_get(const logprobs_backend_list* list, uint64_t index,
                                                       logprobs_backend_info* info, logprobs_error** error);
LOGPROBS_API void logprobs_backend_list_free(logprobs_backend_list* list);

/* Runs the named backend at top-K width k, with lp_ranks when `ranks` is nonzero, into a new
 * packed result: LOGPROBS_INVALID_BATCH, LOGPROBS_UNSUPPORTED_PART, LOGPROBS_UNKNOWN_BACKEND or
 * LOGPROBS_UNAVAILABLE before it reads the logits. */
LOGPROBS_API logprobs_status logprobs_run(const char* backend, const logprobs_batch_view* batch, uint32_t k,
                                          int32_t ranks, logprobs_result** result, logprobs_error** error);
/* The same for the reference backend, the contract's answer. */
LOGPROBS_API logprobs_status logprobs_reference(const logprobs_batch_view* batch, uint32_t k, int32_t ranks,
                                                logprobs_result** result, logprobs_error** error);

/* ---- Judging (SPEC §5, §6) --------------------------------------------------------------- */

/* SPEC §5: |v - ref| <= ulps * ulp(ref) + norm_ulps * ulp(|m| + log V) + sum_err(row), where the
 * sum rule gives sum_err: LOGPROBS_SUM_CALIBRATED max(sigma * dev, floor * 2^-24), dev the largest
 * drift of an honest f32 sum of the row's exponentials (in 4 to 1024 lanes) from the exact sum;
 * LOGPROBS_SUM_LINEAR V * 2^-24 (one f32 chain); LOGPROBS_SUM_SQRT sigma * sqrt(V) * 2^-24
 * (contract version 2's rule). Each number finite and >= 0. */
#define LOGPROBS_SUM_CALIBRATED 0
#define LOGPROBS_SUM_LINEAR 1
#define LOGPROBS_SUM_SQRT 2
typedef struct logprobs_tolerance {
  double ulps;
  double norm_ulps;
  double sigma;
  int32_t sum_rule;
  double floor;
} logprobs_tolerance;
/* The defaults: ulps 4, norm_ulps 4, sigma 2, LOGPROBS_SUM_CALIBRATED, floor 8. */
LOGPROBS_API void logprobs_tolerance_default(logprobs_tolerance* tolerance);
/* "calibrated", "linear", "sqrt"; "unknown" for another value. */
LOGPROBS_API const char* logprobs_sum_rule_name(int32_t sum_rule);

/* The rule a violation breaks (logprobs-check's names, from logprobs_rule_name). */
#define LOGPROBS_RULE_SHAPE 0
#define LOGPROBS_RULE_LAST_TOKEN 1
#define LOGPROBS_RULE_TOKEN_RANGE 2
#define LOGPROBS_RULE_DUPLICATE_TOKEN 3
#define LOGPROBS_RULE_NOT_CANDIDATE 4
#define LOGPROBS_RULE_NOT_TOP 5
#define LOGPROBS_RULE_PADDING_COUNT 6
#define LOGPROBS_RULE_VALUE 7
#define LOGPROBS_RULE_RANK 8
#define LOGPROBS_RULE_GREEDY_EXACT 9
/* "shape", "last_token", ..., "greedy_exact"; "unknown" for another value. */
LOGPROBS_API const char* logprobs_rule_name(int32_t rule);

typedef struct logprobs_violation {
  int32_t rule;
  const char* rule_name;
  uint64_t batch;
  uint64_t output_row;
  uint64_t slot;
  uint32_t token;
  const char* what;    /* the rule broken, with got and want */
  const char* message; /* "batch 2, output row 7, slot 3: token 17 got ... want ..." */
  /* The tolerance of the violation's row (a value violation's allowed error is built on it). */
  int32_t sum_rule;
  double dev;     /* the row's calibration (SPEC §5); 0 under the other rules */
  double sum_err; /* the row's summation term */
} logprobs_violation;

/* A row a figure was reached on: where, what kind ("confident", "masked", "flat", "spread"), and
 * its summation term. */
typedef struct logprobs_row_location {
  int32_t found; /* 0: no finite value was compared, and nothing below is set */
  uint64_t batch;
  uint64_t output_row;
  const char* kind;
  uint64_t vocab;
  double top_probability; /* the largest x's probability, 1 / S */
  uint64_t masked; /* entries of -inf */
  int32_t sum_rule;
  double dev;
  double sum_err;
} logprobs_row_location;

/* The largest errors against the reference over the finite values compared (also when they
 * passed), and the tolerance the result was judged by. */
typedef struct logprobs_stats {
  uint64_t rows;
  uint64_t values;
  double max_abs_error;
  double max_ulp_error;      /* over values with |ref| >= 2^-10 */
  double max_tolerance_used; /* max |got - ref| / allowed: at most 1 passes */
  logprobs_tolerance tolerance;
  logprobs_row_location max_tolerance_row; /* where max_tolerance_used was reached */
} logprobs_stats;

typedef struct logprobs_verdict logprobs_verdict;
/* Judges `got`, any implementation's result for the batch at top-K width k, against the input
 * and the reference (tolerance NULL: the defaults). A result of the wrong shape is a violation,
 * not an error; LOGPROBS_INVALID_BATCH when the batch or K break SPEC §4. Every violation is
 * counted; the verdict keeps the first LOGPROBS_DEFAULT_KEPT_VIOLATIONS (in row order). */
LOGPROBS_API logprobs_status logprobs_judge(const logprobs_batch_view* batch, uint32_t k,
                                            const logprobs_result_view* got, const logprobs_tolerance* tolerance,
                                            logprobs_verdict** verdict, logprobs_error** error);
#define LOGPROBS_DEFAULT_KEPT_VIOLATIONS 1000
/* logprobs_judge keeping the first max_kept violations (0: none; each is still counted): a result
 * wrong at every slot has millions, each kept one costs a few hundred bytes. */
/* (API version 4) */
LOGPROBS_API logprobs_status logprobs_judge_keeping(const logprobs_batch_view* batch, uint32_t k,
                                                    const logprobs_result_view* got,
                                                    const logprobs_tolerance* tolerance, uint64_t max_kept,
                                                    logprobs_verdict** verdict, logprobs_error** error);
LOGPROBS_API int32_t logprobs_verdict_ok(const logprobs_verdict* verdict);
/* The violations kept, which logprobs_verdict_violation reads (indices 0 to this - 1). */
LOGPROBS_API uint64_t logprobs_verdict_violation_count(const logprobs_verdict* verdict);
/* Every violation found, kept or not; and those of one rule (LOGPROBS_RULE_...; 0 for another). */
LOGPROBS_API uint64_t logprobs_verdict_violations_found(const logprobs_verdict* verdict);
LOGPROBS_API uint64_t logprobs_verdict_rule_count(const logprobs_verdict* verdict, int32_t rule);
LOGPROBS_API logprobs_status logprobs_verdict_violation(const logprobs_verdict* verdict, uint64_t index,
                                                        logprobs_violation* violation, logprobs_error** error);
LOGPROBS_API void logprobs_verdict_stats(const logprobs_verdict* verdict, logprobs_stats* stats);

/* What the diagnosis names on a failing verdict (API version 3): a class of kernel bug by its
 * stable name ("normalizer_shift", "values_rounded_bf16", ..., "rank_strict": the list is in
 * docs/logprobs-check.md), the output rows it explains (ascending) and one sentence of evidence.
 * A passing verdict, or a failing one that fits no class, has none. The texts and the rows belong
 * to the verdict: valid until logprobs_verdict_free. */
typedef struct logprobs_diagnosis {
  const char* name;
  const uint64_t* rows;
  uint64_t row_count;
  const char* evidence;
  const char* message; /* "<name>: <evidence>" */
} logprobs_diagnosis;
LOGPROBS_API uint64_t logprobs_verdict_diagnosis_count(const logprobs_verdict* verdict);
LOGPROBS_API logprobs_status logprobs_verdict_diagnosis(const logprobs_verdict* verdict, uint64_t index,
                                                        logprobs_diagnosis* diagnosis, logprobs_error** error);
LOGPROBS_API void logprobs_verdict_free(logprobs_verdict* verdict);

/* ---- Random batches (the generators of fuzz/generators.hpp) ------------------------------ */

#define LOGPROBS_ANY (-1)          /* a choice left to the generator */
#define LOGPROBS_OFFSETS_NO_ECHO 0 /* one logit row and one output row per batch item */
#define LOGPROBS_OFFSETS_ECHO 1    /* logit, token and output offsets all equal */
#define LOGPROBS_OFFSETS_ARBITRARY 2

typedef struct logprobs_random_options {
  int32_t dtype;        /* LOGPROBS_ANY, or a logits dtype */
  uint64_t vocab;       /* 0: drawn (1..4096 and real vocab sizes); else V, up to 2^24 */
  int32_t offsets;      /* LOGPROBS_ANY, or LOGPROBS_OFFSETS_... */
  int32_t temperatures; /* LOGPROBS_ANY, 0 never, 1 always */
  int32_t finite;       /* nonzero: no NaN, infinity or -inf mask in any row a kernel reads */
} logprobs_random_options;
/* Every choice left to the generator. */
LOGPROBS_API void logprobs_random_options_default(logprobs_random_options* options);

/* The batch the generator draws from `seed` at size 0..100 (which scales B, V and rows); the same
 * seed, size and options give the same batch. options NULL: the defaults. */
LOGPROBS_API logprobs_status logprobs_random_batch(uint64_t seed, int32_t size, const logprobs_random_options* options,
                                                   logprobs_batch** batch, logprobs_error** error);
/* A K the generator draws from `seed` (MAX's 2^L - 1, 5, 20, small ones, any up to 65535). */
LOGPROBS_API logprobs_status logprobs_random_k(uint64_t seed, uint32_t* k, logprobs_error** error);

/* The hand cases the campaign runs before its random ones (one small batch per SPEC situation,
 * valid at every K): how many there are, and case `index`'s name and batch. */
LOGPROBS_API uint64_t logprobs_hand_case_count(void);
LOGPROBS_API logprobs_status logprobs_hand_case(uint64_t index, const char** name, logprobs_batch** batch,
                                                logprobs_error** error);

/* A predicate on a candidate batch: 1 it fails, 0 it passes, negative to stop the search. The view
 * is valid during the call only. */
typedef int32_t (*logprobs_fails_fn)(const logprobs_batch_view* candidate, void* user_data);

/* Draws the batch of (seed, size, options); if `fails` holds for it, shrinks it with RapidCheck's
 * shrinks (fewer batch items and rows, smaller V, plainer values, no injected specials) while
 * `fails` keeps holding, greedily, calling `fails` at most max_tries times, and returns the
 * smallest failing batch in *smallest and the shrinks taken in *shrink_steps. *smallest is NULL
 * when the drawn batch passes. LOGPROBS_CALLBACK_FAILED when `fails` returned a negative value. */
LOGPROBS_API logprobs_status logprobs_find_counterexample(uint64_t seed, int32_t size,
                                                          const logprobs_random_options* options,
                                                          logprobs_fails_fn fails, void* user_data, int32_t max_tries,
                                                          logprobs_batch** smallest, int32_t* shrink_steps,
                                                          logprobs_error** error);

/* ---- Files (SPEC §7) --------------------------------------------------------------------- */

/* Reads a batch file (logits kept in the file's dtype). */
LOGPROBS_API logprobs_status logprobs_load_batch(const char* path, logprobs_batch** batch, logprobs_error** error);
/* Reads a result file in either layout (told apart by its tensor names). */
LOGPROBS_API logprobs_status logprobs_load_result(const char* path, logprobs_result** result, logprobs_error** error);
/* Metadata of a loaded file, entry by entry (index < the count); NULL keys and values past it. */
LOGPROBS_API uint64_t logprobs_batch_metadata_count(const logprobs_batch* batch);
LOGPROBS_API void logprobs_batch_metadata(const logprobs_batch* batch, uint64_t index, const char** key,
                                          const char** value);
LOGPROBS_API uint64_t logprobs_result_metadata_count(const logprobs_result* result);
LOGPROBS_API void logprobs_result_metadata(const logprobs_result* result, uint64_t index, const char** key,
                                           const char** value);

/* Writers, atomic (a temporary file in the same folder, then a rename). A batch is written with
 * rows of V logits in its dtype, K as metadata "k" when k >= 0, and metadata_count more entries
 * (keys and values, NUL-terminated strings). A result is written in its view's layout. */
LOGPROBS_API logprobs_status logprobs_save_batch(const char* path, const logprobs_batch_view* batch, int64_t k,
                                                 const char* const* metadata_keys, const char* const* metadata_values,
                                                 uint64_t metadata_count, logprobs_error** error);
LOGPROBS_API logprobs_status logprobs_save_result(const char* path, const logprobs_result_view* result,
                                                  const char* const* metadata_keys, const char* const* metadata_values,
                                                  uint64_t metadata_count, logprobs_error** error);

#ifdef __cplusplus
}
#endif

#endif /* LOGPROBS_LOGPROBS_H */
