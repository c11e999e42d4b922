/* The layout of the C API's structs, as the C compiler lays them out: each struct's size and
 * each field's offset, one per line ("logprobs_batch_view.rows 16"). The Python package's test
 * compares them with its ctypes declarations, so the two cannot drift apart unseen. */
#include <stddef.h>
#include <stdio.h>

#include "logprobs/logprobs.h"

int main(void) {
  printf("logprobs_batch_view size %lu\n", (unsigned long)sizeof(logprobs_batch_view));
  printf("logprobs_batch_view.logits %lu\n", (unsigned long)offsetof(logprobs_batch_view, logits));
  printf("logprobs_batch_view.dtype %lu\n", (unsigned long)offsetof(logprobs_batch_view, dtype));
  printf("logprobs_batch_view.rows %lu\n", (unsigned long)offsetof(logprobs_batch_view, rows));
  printf("logprobs_batch_view.vocab %lu\n", (unsigned long)offsetof(logprobs_batch_view, vocab));
  printf("logprobs_batch_view.row_stride %lu\n", (unsigned long)offsetof(logprobs_batch_view, row_stride));
  printf("logprobs_batch_view.tokens %lu\n", (unsigned long)offsetof(logprobs_batch_view, tokens));
  printf("logprobs_batch_view.tokens_count %lu\n", (unsigned long)offsetof(logprobs_batch_view, tokens_count));
  printf("logprobs_batch_view.sampled_tokens %lu\n", (unsigned long)offsetof(logprobs_batch_view, sampled_tokens));
  printf("logprobs_batch_view.batch_size %lu\n", (unsigned long)offsetof(logprobs_batch_view, batch_size));
  printf("logprobs_batch_view.logit_row_offsets %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, logit_row_offsets));
  printf("logprobs_batch_view.logit_row_offsets_count %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, logit_row_offsets_count));
  printf("logprobs_batch_view.token_row_offsets %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, token_row_offsets));
  printf("logprobs_batch_view.token_row_offsets_count %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, token_row_offsets_count));
  printf("logprobs_batch_view.lp_output_offsets %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, lp_output_offsets));
  printf("logprobs_batch_view.lp_output_offsets_count %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, lp_output_offsets_count));
  printf("logprobs_batch_view.has_temperatures %lu\n", (unsigned long)offsetof(logprobs_batch_view, has_temperatures));
  printf("logprobs_batch_view.temperatures %lu\n", (unsigned long)offsetof(logprobs_batch_view, temperatures));
  printf("logprobs_batch_view.temperatures_count %lu\n",
         (unsigned long)offsetof(logprobs_batch_view, temperatures_count));
  printf("logprobs_result_view size %lu\n", (unsigned long)sizeof(logprobs_result_view));
  printf("logprobs_result_view.layout %lu\n", (unsigned long)offsetof(logprobs_result_view, layout));
  printf("logprobs_result_view.rows %lu\n", (unsigned long)offsetof(logprobs_result_view, rows));
  printf("logprobs_result_view.columns %lu\n", (unsigned long)offsetof(logprobs_result_view, columns));
  printf("logprobs_result_view.lp_logits %lu\n", (unsigned long)offsetof(logprobs_result_view, lp_logits));
  printf("logprobs_result_view.lp_tokens %lu\n", (unsigned long)offsetof(logprobs_result_view, lp_tokens));
  printf("logprobs_result_view.top_tokens %lu\n", (unsigned long)offsetof(logprobs_result_view, top_tokens));
  printf("logprobs_result_view.top_logprobs %lu\n", (unsigned long)offsetof(logprobs_result_view, top_logprobs));
  printf("logprobs_result_view.sampled_logprobs %lu\n",
         (unsigned long)offsetof(logprobs_result_view, sampled_logprobs));
  printf("logprobs_result_view.has_ranks %lu\n", (unsigned long)offsetof(logprobs_result_view, has_ranks));
  printf("logprobs_result_view.ranks %lu\n", (unsigned long)offsetof(logprobs_result_view, ranks));
  printf("logprobs_backend_info size %lu\n", (unsigned long)sizeof(logprobs_backend_info));
  printf("logprobs_backend_info.name %lu\n", (unsigned long)offsetof(logprobs_backend_info, name));
  printf("logprobs_backend_info.description %lu\n", (unsigned long)offsetof(logprobs_backend_info, description));
  printf("logprobs_backend_info.available %lu\n", (unsigned long)offsetof(logprobs_backend_info, available));
  printf("logprobs_backend_info.unavailable_reason %lu\n",
         (unsigned long)offsetof(logprobs_backend_info, unavailable_reason));
  printf("logprobs_backend_info.variant_of %lu\n", (unsigned long)offsetof(logprobs_backend_info, variant_of));
  printf("logprobs_backend_info.bf16_logits %lu\n", (unsigned long)offsetof(logprobs_backend_info, bf16_logits));
  printf("logprobs_backend_info.f16_logits %lu\n", (unsigned long)offsetof(logprobs_backend_info, f16_logits));
  printf("logprobs_backend_info.temperatures %lu\n", (unsigned long)offsetof(logprobs_backend_info, temperatures));
  printf("logprobs_backend_info.ranks %lu\n", (unsigned long)offsetof(logprobs_backend_info, ranks));
  printf("logprobs_backend_info.any_k %lu\n", (unsigned long)offsetof(logprobs_backend_info, any_k));
  printf("logprobs_backend_info.sums_in_one_chain %lu\n",
         (unsigned long)offsetof(logprobs_backend_info, sums_in_one_chain));
  printf("logprobs_backend_info.claims_canonical_arithmetic %lu\n",
         (unsigned long)offsetof(logprobs_backend_info, claims_canonical_arithmetic));
  printf("logprobs_backend_info.computes_on_host %lu\n",
         (unsigned long)offsetof(logprobs_backend_info, computes_on_host));
  printf("logprobs_tolerance size %lu\n", (unsigned long)sizeof(logprobs_tolerance));
  printf("logprobs_tolerance.ulps %lu\n", (unsigned long)offsetof(logprobs_tolerance, ulps));
  printf("logprobs_tolerance.norm_ulps %lu\n", (unsigned long)offsetof(logprobs_tolerance, norm_ulps));
  printf("logprobs_tolerance.sigma %lu\n", (unsigned long)offsetof(logprobs_tolerance, sigma));
  printf("logprobs_tolerance.linear_sum %lu\n", (unsigned long)offsetof(logprobs_tolerance, linear_sum));
  printf("logprobs_violation size %lu\n", (unsigned long)sizeof(logprobs_violation));
  printf("logprobs_violation.rule %lu\n", (unsigned long)offsetof(logprobs_violation, rule));
  printf("logprobs_violation.rule_name %lu\n", (unsigned long)offsetof(logprobs_violation, rule_name));
  printf("logprobs_violation.batch %lu\n", (unsigned long)offsetof(logprobs_violation, batch));
  printf("logprobs_violation.output_row %lu\n", (unsigned long)offsetof(logprobs_violation, output_row));
  printf("logprobs_violation.slot %lu\n", (unsigned long)offsetof(logprobs_violation, slot));
  printf("logprobs_violation.token %lu\n", (unsigned long)offsetof(logprobs_violation, token));
  printf("logprobs_violation.what %lu\n", (unsigned long)offsetof(logprobs_violation, what));
  printf("logprobs_violation.message %lu\n", (unsigned long)offsetof(logprobs_violation, message));
  printf("logprobs_stats size %lu\n", (unsigned long)sizeof(logprobs_stats));
  printf("logprobs_stats.rows %lu\n", (unsigned long)offsetof(logprobs_stats, rows));
  printf("logprobs_stats.values %lu\n", (unsigned long)offsetof(logprobs_stats, values));
  printf("logprobs_stats.max_abs_error %lu\n", (unsigned long)offsetof(logprobs_stats, max_abs_error));
  printf("logprobs_stats.max_ulp_error %lu\n", (unsigned long)offsetof(logprobs_stats, max_ulp_error));
  printf("logprobs_stats.max_tolerance_used %lu\n", (unsigned long)offsetof(logprobs_stats, max_tolerance_used));
  printf("logprobs_stats.tolerance %lu\n", (unsigned long)offsetof(logprobs_stats, tolerance));
  printf("logprobs_random_options size %lu\n", (unsigned long)sizeof(logprobs_random_options));
  printf("logprobs_random_options.dtype %lu\n", (unsigned long)offsetof(logprobs_random_options, dtype));
  printf("logprobs_random_options.vocab %lu\n", (unsigned long)offsetof(logprobs_random_options, vocab));
  printf("logprobs_random_options.offsets %lu\n", (unsigned long)offsetof(logprobs_random_options, offsets));
  printf("logprobs_random_options.temperatures %lu\n", (unsigned long)offsetof(logprobs_random_options, temperatures));
  printf("logprobs_random_options.finite %lu\n", (unsigned long)offsetof(logprobs_random_options, finite));
  return 0;
}
