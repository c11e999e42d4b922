// SPEC §7: batches and results as safetensors files (the container is safetensors.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "batch_data.hpp"
#include "safetensors.hpp"
#include "split_result.hpp"

namespace logprobs {

struct BatchFile {
  BatchData batch;                 // row_stride == vocab, logits in the file's dtype
  std::optional<std::uint32_t> k;  // from metadata "k", or "levels" L as K = 2^L - 1
  FileMetadata metadata;
};

enum class ResultLayout { packed, split };

struct ResultFile {
  ResultLayout layout = ResultLayout::packed;
  ResultData packed;               // layout packed: lp_logits, lp_tokens [N, W], lp_ranks [N] when present
  SplitResult split;               // layout split: top_tokens, top_logprobs [N, K], sampled_logprobs [N], ...
  std::optional<std::uint32_t> k;  // from metadata "k" or "levels" (`logprobs-check run` writes "k")
  FileMetadata metadata;

  // The result in the packed layout; a split one takes its evaluated tokens from the batch.
  ResultData as_packed(const RaggedBatch& batch) const;
  // The K its shape says (none for a packed width of 0), and that shape in its layout's words:
  // "lp_logits is [N, W]" or "top_tokens is [N, K]".
  std::optional<std::uint64_t> shape_k() const;
  std::string shape_text() const;
};

// Reads a batch file: logits F32, BF16 or F16 [rows, V], kept in that dtype; tokens, offsets U32;
// temperatures F32 [B] when present. Sizes are checked against the file's size, and each tensor
// against `budget` when given one, before anything is allocated. Throws FileError (and
// MemoryBudgetExceeded). Does not check SPEC §4 (validate_batch does).
BatchFile read_batch_file(const std::filesystem::path& path, MemoryBudget* budget = nullptr);

// Reads a result file in either layout, told apart by its tensor names. Throws FileError (and
// MemoryBudgetExceeded).
ResultFile read_result_file(const std::filesystem::path& path, MemoryBudget* budget = nullptr);

// Writers, atomic (see write_safetensors). logits are written in the batch's dtype as [rows, V]
// (a row stride > V is dropped), temperatures when the batch has them. `k`, when given, goes
// into the metadata as "k". Throw FileError.
void write_batch_file(const std::filesystem::path& path, const BatchData& batch, std::optional<std::uint32_t> k = {},
                      const FileMetadata& metadata = {});
void write_result_file(const std::filesystem::path& path, const ResultData& result,
                       const FileMetadata& metadata = {});
void write_split_result_file(const std::filesystem::path& path, const SplitResult& result,
                             const FileMetadata& metadata = {});

}  // namespace logprobs
