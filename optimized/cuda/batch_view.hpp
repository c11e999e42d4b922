// The contract's batch view in the CUDA API's terms (host code only): the dtype, and a DeviceBatch
// holding the view's own pointers, which the backend points at its device copies and the host
// model reads as they are.
#pragma once

#include "device_batch.hpp"
#include "logprobs/batch.hpp"

namespace logprobs {

inline DeviceDtype device_dtype(LogitsDtype dtype) {
  return dtype == LogitsDtype::f32    ? DeviceDtype::f32
         : dtype == LogitsDtype::bf16 ? DeviceDtype::bf16
                                      : DeviceDtype::f16;
}

inline DeviceBatch device_batch_of(const RaggedBatch& view) {
  DeviceBatch b;
  b.logits = view.logits;
  b.dtype = device_dtype(view.dtype);
  b.rows = view.rows;
  b.vocab = view.vocab;
  b.row_stride = view.row_stride;
  b.tokens = view.tokens.data();
  b.sampled_tokens = view.sampled_tokens.data();
  b.logit_row_offsets = view.logit_row_offsets.data();
  b.token_row_offsets = view.token_row_offsets.data();
  b.lp_output_offsets = view.lp_output_offsets.data();
  b.temperatures = view.has_temperatures() ? view.temperatures->data() : nullptr;
  b.batch_size = view.batch_size();
  b.output_rows = view.output_rows();
  return b;
}

}  // namespace logprobs
