/* The layout of the C API's structs, as the C compiler lays them out: each struct's size and
 * each field's offset, one per line ("logprobs_batch_view.rows 16"). The Python package's test
 * compares them with its ctypes declarations, so the two cannot drift apart unseen. */
#include <stddef.h>
#include <stdio.h>

#include "logprobs/logprobs.h"

/* One name gives both the printed label and the measured field, so they cannot disagree. */
#define SIZE(type) printf(#type " size %lu\n", (unsigned long)sizeof(type))
#define OFFSET(type, field) printf(#type "." #field " %lu\n", (unsigned long)offsetof(type, field))

int main(void) {
  SIZE(logprobs_batch_view);
  OFFSET(logprobs_batch_view, logits);
  OFFSET(logprobs_batch_view, dtype);
  OFFSET(logprobs_batch_view, rows);
  OFFSET(logprobs_batch_view, vocab);
  OFFSET(logprobs_batch_view, row_stride);
  OFFSET(logprobs_batch_view, tokens);
  OFFSET(logprobs_batch_view, tokens_count);
  OFFSET(logprobs_batch_view, sampled_tokens);
  OFFSET(logprobs_batch_view, batch_size);
  OFFSET(logprobs_batch_view, logit_row_offsets);
  OFFSET(logprobs_batch_view, logit_row_offsets_count);
  OFFSET(logprobs_batch_view, token_row_offsets);
  OFFSET(logprobs_batch_view, token_row_offsets_count);
  OFFSET(logprobs_batch_view, lp_output_offsets);
  OFFSET(logprobs_batch_view, lp_output_offsets_count);
  OFFSET(logprobs_batch_view, has_temperatures);
  OFFSET(logprobs_batch_view, temperatures);
  OFFSET(logprobs_batch_view, temperatures_count);
  SIZE(logprobs_result_view);
  OFFSET(logprobs_result_view, layout);
  OFFSET(logprobs_result_view, rows);
  OFFSET(logprobs_result_view, columns);
  OFFSET(logprobs_result_view, lp_logits);
  OFFSET(logprobs_result_view, lp_tokens);
  OFFSET(logprobs_result_view, top_tokens);
  OFFSET(logprobs_result_view, top_logprobs);
  OFFSET(logprobs_result_view, sampled_logprobs);
  OFFSET(logprobs_result_view, has_ranks);
  OFFSET(logprobs_result_view, ranks);
  SIZE(logprobs_backend_info);
  OFFSET(logprobs_backend_info, name);
  OFFSET(logprobs_backend_info, description);
  OFFSET(logprobs_backend_info, available);
  OFFSET(logprobs_backend_info, unavailable_reason);
  OFFSET(logprobs_backend_info, variant_of);
  OFFSET(logprobs_backend_info, bf16_logits);
  OFFSET(logprobs_backend_info, f16_logits);
  OFFSET(logprobs_backend_info, temperatures);
  OFFSET(logprobs_backend_info, ranks);
  OFFSET(logprobs_backend_info, any_k);
  OFFSET(logprobs_backend_info, sums_in_one_chain);
  OFFSET(logprobs_backend_info, claims_canonical_arithmetic);
  OFFSET(logprobs_backend_info, computes_on_host);
  SIZE(logprobs_tolerance);
  OFFSET(logprobs_tolerance, ulps);
  OFFSET(logprobs_tolerance, norm_ulps);
  OFFSET(logprobs_tolerance, sigma);
  OFFSET(logprobs_tolerance, sum_rule);
  OFFSET(logprobs_tolerance, floor);
  SIZE(logprobs_violation);
  OFFSET(logprobs_violation, rule);
  OFFSET(logprobs_violation, rule_name);
  OFFSET(logprobs_violation, batch);
  OFFSET(logprobs_violation, output_row);
  OFFSET(logprobs_violation, slot);
  OFFSET(logprobs_violation, token);
  OFFSET(logprobs_violation, what);
  OFFSET(logprobs_violation, message);
  OFFSET(logprobs_violation, sum_rule);
  OFFSET(logprobs_violation, dev);
  OFFSET(logprobs_violation, sum_err);
  SIZE(logprobs_row_location);
  OFFSET(logprobs_row_location, found);
  OFFSET(logprobs_row_location, batch);
  OFFSET(logprobs_row_location, output_row);
  OFFSET(logprobs_row_location, kind);
  OFFSET(logprobs_row_location, vocab);
  OFFSET(logprobs_row_location, top_probability);
  OFFSET(logprobs_row_location, masked);
  OFFSET(logprobs_row_location, sum_rule);
  OFFSET(logprobs_row_location, dev);
  OFFSET(logprobs_row_location, sum_err);
  SIZE(logprobs_stats);
  OFFSET(logprobs_stats, rows);
  OFFSET(logprobs_stats, values);
  OFFSET(logprobs_stats, max_abs_error);
  OFFSET(logprobs_stats, max_ulp_error);
  OFFSET(logprobs_stats, max_tolerance_used);
  OFFSET(logprobs_stats, tolerance);
  OFFSET(logprobs_stats, max_tolerance_row);
  SIZE(logprobs_diagnosis);
  OFFSET(logprobs_diagnosis, name);
  OFFSET(logprobs_diagnosis, rows);
  OFFSET(logprobs_diagnosis, row_count);
  OFFSET(logprobs_diagnosis, evidence);
  OFFSET(logprobs_diagnosis, message);
  SIZE(logprobs_random_options);
  OFFSET(logprobs_random_options, dtype);
  OFFSET(logprobs_random_options, vocab);
  OFFSET(logprobs_random_options, offsets);
  OFFSET(logprobs_random_options, temperatures);
  OFFSET(logprobs_random_options, finite);
  return 0;
}
