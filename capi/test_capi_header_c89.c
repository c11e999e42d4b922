/* The C API's header compiled alone as C89 with -pedantic-errors (see CMakeLists.txt): a
 * declaration that needs C99 or C++ fails the build. The function uses every type once, so an
 * incomplete or misspelled one fails too. */
#include "logprobs/logprobs.h"

size_t logprobs_c89_sizes(void);

size_t logprobs_c89_sizes(void) {
  return sizeof(logprobs_batch_view) + sizeof(logprobs_result_view) + sizeof(logprobs_backend_info) +
         sizeof(logprobs_tolerance) + sizeof(logprobs_violation) + sizeof(logprobs_stats) + sizeof(logprobs_diagnosis) +
         sizeof(logprobs_random_options) + sizeof(logprobs_fails_fn) + sizeof(logprobs_status);
}
