// The libtorch peer: what a user without this project would write, torch::log_softmax over the
// rows, torch::topk of the K largest log-probabilities, and a gather of the sampled token's.
// Writes the same [N, W] outputs as a backend (padding slots when K > V, since topk refuses
// k > V), so its results can be checked like any backend's.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "logprobs/batch.hpp"
#include "targets.hpp"

namespace logprobs::bench {

namespace {

void run_torch(const BatchData& batch, std::uint32_t k, int threads, ResultData& out) {
  at::set_num_threads(threads);
  const auto rows = static_cast<std::int64_t>(batch.rows);
  const auto vocab = static_cast<std::int64_t>(batch.vocab);
  const auto stride = static_cast<std::int64_t>(batch.row_stride);
  // The benchmark batches map output row i to logit row i (bench_data.hpp), as a server's
  // decode step does, so the peer needs no row plan.
  // vLLM's way: the logits (of the model's dtype) made f32, then log_softmax, topk and gather.
  const bool wide = batch.dtype == LogitsDtype::f32;
  void* data = wide ? static_cast<void*>(const_cast<float*>(batch.logits.data()))
                    : static_cast<void*>(const_cast<std::uint16_t*>(batch.logits16.data()));
  const auto dtype = wide ? at::kFloat : batch.dtype == LogitsDtype::bf16 ? at::kBFloat16 : at::kHalf;
  at::Tensor logits = at::from_blob(data, {rows, vocab}, {stride, 1}, at::TensorOptions().dtype(dtype)).to(at::kFloat);
  if (batch.temperatures) {  // one batch item per row here: row r at temperatures[r], as vLLM divides
    const at::Tensor t = at::from_blob(const_cast<float*>(batch.temperatures->data()), {rows, 1},
                                       at::TensorOptions().dtype(at::kFloat));
    logits = logits / t;
  }
  std::vector<std::int64_t> sampled(batch.sampled_tokens.begin(), batch.sampled_tokens.end());
  const at::Tensor index = at::from_blob(sampled.data(), {rows, 1}, at::TensorOptions().dtype(at::kLong));

  const at::Tensor logprobs = at::log_softmax(logits, 1);
  const at::Tensor chosen = logprobs.gather(1, index).contiguous();

  const std::uint64_t width = out.width;
  const float* chosen_values = chosen.data_ptr<float>();
  if (out.ranks) {  // SPEC 2.9 on x, as vLLM counts: the tokens at least as likely (NaN never counts)
    const at::Tensor counts = (logits >= logits.gather(1, index)).sum(1).to(at::kInt).contiguous();
    const std::int32_t* cp = counts.data_ptr<std::int32_t>();
    for (std::uint64_t r = 0; r < batch.rows; ++r) out.lp_ranks[r] = static_cast<std::uint32_t>(cp[r]);
  }
  for (std::uint64_t r = 0; r < batch.rows; ++r) {
    out.lp_logits[r * width + k] = chosen_values[r];
    out.lp_tokens[r * width + k] = batch.sampled_tokens[r];
  }
  if (k == 0) return;

  const std::int64_t kept = std::min<std::int64_t>(static_cast<std::int64_t>(k), vocab);
  const auto [values, tokens] = at::topk(logprobs, kept, 1);
  const at::Tensor v = values.contiguous();
  const at::Tensor t = tokens.contiguous();
  const float* vp = v.data_ptr<float>();
  const std::int64_t* tp = t.data_ptr<std::int64_t>();
  for (std::uint64_t r = 0; r < batch.rows; ++r) {
    for (std::uint64_t s = 0; s < k; ++s) {
      const bool real = static_cast<std::int64_t>(s) < kept;
      out.lp_logits[r * width + s] = real ? vp[r * kept + s] : -std::numeric_limits<float>::infinity();
      out.lp_tokens[r * width + s] = real ? static_cast<std::uint32_t>(tp[r * kept + s])
                                          : static_cast<std::uint32_t>(batch.vocab);
    }
  }
}

}  // namespace

Target torch_peer() { return {"torch", run_torch}; }

}  // namespace logprobs::bench
