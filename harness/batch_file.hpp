// SPEC §7: batches and results as safetensors files (8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw little-endian tensor bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "batch_data.hpp"

namespace logprobs {

// A file that is not a well-formed batch or result file: a broken container, a missing tensor,
// a wrong dtype or shape. Distinct from InvalidBatch, which says that well-formed arrays break
// SPEC §4; the command treats both as invalid input (exit 2). The message starts with the path.
class BatchFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using FileMetadata = std::map<std::string, std::string>;

struct BatchFile {
  BatchData batch;  // row_stride == vocab
  std::optional<int> levels;  // from metadata "levels", when present
  FileMetadata metadata;
};

struct ResultFile {
  ResultData result;
  std::optional<int> levels;  // from metadata "levels", when present (`logprobs-check run` writes it)
  FileMetadata metadata;
};

// Reads a batch file. logits may be F32, BF16 or F16 (widened to f32); every other tensor is U32.
// Sizes are checked against the file's size before anything is allocated. Throws BatchFileError.
// Does not check SPEC §4 (validate_batch does).
BatchFile read_batch_file(const std::filesystem::path& path);

// Reads a result file: lp_logits F32 [N, W] and lp_tokens U32 [N, W]. Throws BatchFileError.
ResultFile read_result_file(const std::filesystem::path& path);

// Writers. Atomic: the file is written under a temporary name in the same folder and renamed, so
// a reader never sees half a file. logits are written as F32 [rows, V] (a row stride > V is
// dropped). `levels`, when given, goes into the metadata as "levels". Throw BatchFileError.
void write_batch_file(const std::filesystem::path& path, const BatchData& batch, std::optional<int> levels = {},
                      const FileMetadata& metadata = {});
void write_result_file(const std::filesystem::path& path, const ResultData& result,
                       const FileMetadata& metadata = {});

// The container alone, for writing files of any dtype (tests write BF16/F16 logits this way).
struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "U32", "BF16", "F16", ...
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> data;  // little-endian, exactly product(shape) * dtype size bytes
};
void write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsTensor> tensors,
                       const FileMetadata& metadata);

// Half-precision widening (exact: every bf16 and f16 value is an f32 value).
float bf16_to_f32(std::uint16_t bits);
float f16_to_f32(std::uint16_t bits);

}  // namespace logprobs
