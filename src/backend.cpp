// Backend::run and the optional parts of SPEC §4.
#include "logprobs/backend.hpp"

#include <fmt/format.h>

namespace logprobs {

std::string missing_part(const Features& features, const RaggedBatch& batch, std::uint32_t k, bool ranks) {
  if (batch.dtype == LogitsDtype::bf16 && !features.bf16_logits) return "bf16 logits";
  if (batch.dtype == LogitsDtype::f16 && !features.f16_logits) return "f16 logits";
  if (batch.has_temperatures() && !features.temperatures) return "temperatures";
  if (ranks && !features.ranks) return "ranks";
  if (!features.any_k && (k & (k + 1)) != 0) return fmt::format("K = {} (not of the form 2^L - 1)", k);
  return "";
}

void Backend::run(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const {
  validate_batch(batch, k, out);
  if (const std::string part = missing_part(features(), batch, k, out.ranks); !part.empty())
    throw UnsupportedPart(
        fmt::format("backend {} does not implement {} (a valid batch: the backend declares it "
                    "lacks this optional part of SPEC §4)",
                    name(), part));
  compute(batch, k, out);
}

}  // namespace logprobs
