// SPEC §7: batches and results as safetensors files (the container is safetensors.hpp).
#pragma once

#include <filesystem>
#include <optional>

#include "batch_data.hpp"
#include "safetensors.hpp"

namespace logprobs {

struct BatchFile {
  BatchData batch;            // row_stride == vocab
  std::optional<int> levels;  // from metadata "levels", when present
  FileMetadata metadata;
};

struct ResultFile {
  ResultData result;
  std::optional<int> levels;  // from metadata "levels", when present (`logprobs-check run` writes it)
  FileMetadata metadata;
};

// Reads a batch file. logits may be F32, BF16 or F16 (widened to f32); every other tensor is U32.
// Sizes are checked against the file's size before anything is allocated. Throws FileError.
// Does not check SPEC §4 (validate_batch does).
BatchFile read_batch_file(const std::filesystem::path& path);

// Reads a result file: lp_logits F32 [N, W] and lp_tokens U32 [N, W]. Throws FileError.
ResultFile read_result_file(const std::filesystem::path& path);

// Writers, atomic (see write_safetensors). logits are written as F32 [rows, V] (a row stride > V
// is dropped). `levels`, when given, goes into the metadata as "levels". Throw FileError.
void write_batch_file(const std::filesystem::path& path, const BatchData& batch, std::optional<int> levels = {},
                      const FileMetadata& metadata = {});
void write_result_file(const std::filesystem::path& path, const ResultData& result,
                       const FileMetadata& metadata = {});

}  // namespace logprobs
