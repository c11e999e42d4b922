#include "batch_file.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace logprobs {
namespace {

std::optional<int> parse_levels(const SafetensorsReader& reader) {
  const auto it = reader.metadata().find("levels");
  if (it == reader.metadata().end()) return std::nullopt;
  const std::string& text = it->second;
  int levels = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), levels);
  if (ec != std::errc() || end != text.data() + text.size() || levels < 0 || levels > kMaxLevels)
    reader.fail("metadata levels = '{}' is not an integer in 0..{}", text, kMaxLevels);
  return levels;
}

SafetensorsTensor u32_tensor(std::string name, const std::vector<std::uint32_t>& values) {
  return tensor_of(std::move(name), "U32", {values.size()}, std::span<const std::uint32_t>(values));
}

}  // namespace

BatchFile read_batch_file(const std::filesystem::path& path) {
  SafetensorsReader reader(path);
  BatchFile file;
  file.metadata = reader.metadata();
  file.levels = parse_levels(reader);
  BatchData& batch = file.batch;

  const TensorEntry& logits = reader.entry("logits", "F32, BF16 or F16 [rows, V]");
  reader.expect(logits, {"F32", "BF16", "F16"}, 2, "F32, BF16 or F16 [rows, V]");
  batch.rows = logits.shape[0];
  batch.vocab = logits.shape[1];
  batch.row_stride = batch.vocab;
  if (logits.dtype == "F32") {
    batch.logits = reader.read_as<float>(logits);
  } else {
    const std::vector<std::uint16_t> half = reader.read_as<std::uint16_t>(logits);
    const auto widen = logits.dtype == "BF16" ? bf16_to_f32 : f16_to_f32;
    batch.logits.resize(half.size());
    std::transform(half.begin(), half.end(), batch.logits.begin(), widen);
  }

  const auto read_u32 = [&](std::string_view name, std::string_view expected) {
    const TensorEntry& e = reader.entry(name, expected);
    reader.expect(e, {"U32"}, 1, expected);
    return reader.read_as<std::uint32_t>(e);
  };
  batch.tokens = read_u32("tokens", "U32 [T]");
  batch.sampled_tokens = read_u32("sampled_tokens", "U32 [B]");
  batch.logit_row_offsets = read_u32("logit_row_offsets", "U32 [B+1]");
  batch.token_row_offsets = read_u32("token_row_offsets", "U32 [B+1]");
  batch.lp_output_offsets = read_u32("lp_output_offsets", "U32 [B+1]");
  return file;
}

ResultFile read_result_file(const std::filesystem::path& path) {
  SafetensorsReader reader(path);
  const TensorEntry& logits = reader.entry("lp_logits", "F32 [N, W]");
  reader.expect(logits, {"F32"}, 2, "F32 [N, W]");
  const TensorEntry& tokens = reader.entry("lp_tokens", "U32 [N, W]");
  reader.expect(tokens, {"U32"}, 2, "U32 [N, W]");
  if (logits.shape != tokens.shape)
    reader.fail("lp_logits has shape {} but lp_tokens has shape {}; both must be [N, W]", shape_text(logits.shape),
                shape_text(tokens.shape));
  ResultFile file;
  file.metadata = reader.metadata();
  file.levels = parse_levels(reader);
  file.result.rows = logits.shape[0];
  file.result.width = logits.shape[1];
  file.result.lp_logits = reader.read_as<float>(logits);
  file.result.lp_tokens = reader.read_as<std::uint32_t>(tokens);
  return file;
}

void write_batch_file(const std::filesystem::path& path, const BatchData& batch, std::optional<int> levels,
                      const FileMetadata& metadata) {
  if (batch.rows > 0 && batch.logits.size() < (batch.rows - 1) * batch.row_stride + batch.vocab)
    throw FileError(fmt::format("{}: batch has {} logits, too few for {} rows of stride {}", path.string(),
                                batch.logits.size(), batch.rows, batch.row_stride));
  // The file holds rows of exactly V logits: a batch with a wider stride is packed first.
  std::vector<float> packed;
  std::span<const float> logits(batch.logits.data(), batch.rows * batch.vocab);
  if (batch.row_stride != batch.vocab) {
    packed.resize(batch.rows * batch.vocab);
    for (std::uint64_t i = 0; i < batch.rows; ++i)
      std::copy_n(batch.view().logit_row(i).data(), batch.vocab, packed.begin() + std::ptrdiff_t(i * batch.vocab));
    logits = packed;
  }
  const std::vector<SafetensorsTensor> tensors = {
      tensor_of("logits", "F32", {batch.rows, batch.vocab}, logits),
      u32_tensor("tokens", batch.tokens),
      u32_tensor("sampled_tokens", batch.sampled_tokens),
      u32_tensor("logit_row_offsets", batch.logit_row_offsets),
      u32_tensor("token_row_offsets", batch.token_row_offsets),
      u32_tensor("lp_output_offsets", batch.lp_output_offsets),
  };
  FileMetadata all = metadata;
  if (levels) all["levels"] = std::to_string(*levels);
  write_safetensors(path, tensors, all);
}

void write_result_file(const std::filesystem::path& path, const ResultData& result, const FileMetadata& metadata) {
  const std::vector<SafetensorsTensor> tensors = {
      tensor_of("lp_logits", "F32", {result.rows, result.width}, std::span<const float>(result.lp_logits)),
      tensor_of("lp_tokens", "U32", {result.rows, result.width}, std::span<const std::uint32_t>(result.lp_tokens)),
  };
  write_safetensors(path, tensors, metadata);
}

}  // namespace logprobs
