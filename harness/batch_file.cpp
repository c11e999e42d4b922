#include "batch_file.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string_view>

namespace logprobs {
namespace {

// A metadata number: plain decimal digits without a leading zero ("0", "7", "255"), in [0, max].
// Returns the reason it is not one in `problem`.
std::optional<std::uint32_t> metadata_number(const FileMetadata& metadata, std::string_view key, std::uint32_t max,
                                             std::string& problem) {
  const auto it = metadata.find(std::string(key));
  if (it == metadata.end()) return std::nullopt;
  const std::string& text = it->second;
  std::uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value > max ||
      (text.size() > 1 && text[0] == '0'))
    problem = fmt::format("metadata {} = '{}' is not a plain decimal integer in 0..{}", key, text, max);
  return value;
}

// K from metadata "k", or "levels" as 2^L - 1; both may be given if they agree. The one rule for
// the readers and the writers (a writer must not make a file its reader refuses): what breaks it
// goes to `problem`.
std::optional<std::uint32_t> metadata_k(const FileMetadata& metadata, std::string& problem) {
  const std::optional<std::uint32_t> k = metadata_number(metadata, "k", kMaxK, problem);
  const std::optional<std::uint32_t> levels = metadata_number(metadata, "levels", kMaxLevels, problem);
  if (!problem.empty()) return std::nullopt;
  if (k && levels && *k != top_k(int(*levels)))
    problem = fmt::format("metadata k = {} and levels = {} disagree (levels {} is K = {})", *k, *levels, *levels,
                          top_k(int(*levels)));
  if (levels) return top_k(int(*levels));
  return k;
}

std::optional<std::uint32_t> parse_k(const SafetensorsReader& reader) {
  std::string problem;
  const std::optional<std::uint32_t> k = metadata_k(reader.metadata(), problem);
  if (!problem.empty()) reader.fail("{}", problem);
  return k;
}

// What a writer checks of its metadata before writing anything: what the reader would refuse.
void check_metadata(const std::filesystem::path& path, const FileMetadata& metadata) {
  std::string problem;
  metadata_k(metadata, problem);
  if (!problem.empty()) throw FileError(fmt::format("{}: {}; not written", path.string(), problem));
}

std::vector<std::uint32_t> read_u32(SafetensorsReader& reader, std::string_view name, std::size_t rank,
                                    std::string_view expected) {
  const TensorEntry& e = reader.entry(name, expected);
  reader.expect(e, {"U32"}, rank, expected);
  return reader.read_as<std::uint32_t>(e);
}

std::vector<float> read_f32(SafetensorsReader& reader, const TensorEntry& e, std::size_t rank,
                            std::string_view expected) {
  reader.expect(e, {"F32"}, rank, expected);
  return reader.read_as<float>(e);
}

SafetensorsTensor u32_tensor(std::string name, const std::vector<std::uint32_t>& values) {
  return tensor_of(std::move(name), "U32", {values.size()}, std::span<const std::uint32_t>(values));
}

// A tensor of the other layout beside this one (ranks stored as sampled_ranks in a packed file)
// would never be judged: refused by name.
void refuse_other_layout(const SafetensorsReader& reader, std::initializer_list<const char*> others,
                         const char* other_layout, const char* layout, const char* present) {
  for (const char* name : others)
    if (reader.find(name) != nullptr)
      reader.fail("holds {}, a tensor of the {} layout, beside the {} layout's {}; a result is in one layout (SPEC "
                  "§7), and this tensor would not be judged",
                  name, other_layout, layout, present);
}

ResultFile read_packed(SafetensorsReader& reader) {
  ResultFile file;
  file.layout = ResultLayout::packed;
  const TensorEntry& logits = reader.entry("lp_logits", "F32 [N, W]");
  const TensorEntry& tokens = reader.entry("lp_tokens", "U32 [N, W]");
  reader.expect(tokens, {"U32"}, 2, "U32 [N, W]");
  file.packed.lp_logits = read_f32(reader, logits, 2, "F32 [N, W]");
  if (logits.shape != tokens.shape)
    reader.fail("lp_logits has shape {} but lp_tokens has shape {}; both must be [N, W]", shape_text(logits.shape),
                shape_text(tokens.shape));
  file.packed.rows = logits.shape[0];
  file.packed.width = logits.shape[1];
  file.packed.lp_tokens = reader.read_as<std::uint32_t>(tokens);
  if (reader.find("lp_ranks") != nullptr) {
    file.packed.ranks = true;
    file.packed.lp_ranks = read_u32(reader, "lp_ranks", 1, "U32 [N]");
    if (file.packed.lp_ranks.size() != file.packed.rows)
      reader.fail("lp_ranks has {} entries but lp_logits has {} rows", file.packed.lp_ranks.size(), file.packed.rows);
  }
  return file;
}

ResultFile read_split(SafetensorsReader& reader) {
  ResultFile file;
  file.layout = ResultLayout::split;
  SplitResult& split = file.split;
  const TensorEntry& tokens = reader.entry("top_tokens", "U32 [N, K]");
  reader.expect(tokens, {"U32"}, 2, "U32 [N, K]");
  const TensorEntry& values = reader.entry("top_logprobs", "F32 [N, K]");
  split.top_logprobs = read_f32(reader, values, 2, "F32 [N, K]");
  if (values.shape != tokens.shape)
    reader.fail("top_logprobs has shape {} but top_tokens has shape {}; both must be [N, K]", shape_text(values.shape),
                shape_text(tokens.shape));
  split.rows = tokens.shape[0];
  split.k = tokens.shape[1];
  split.top_tokens = reader.read_as<std::uint32_t>(tokens);
  split.sampled_logprobs = read_f32(reader, reader.entry("sampled_logprobs", "F32 [N]"), 1, "F32 [N]");
  if (split.sampled_logprobs.size() != split.rows)
    reader.fail("sampled_logprobs has {} entries but top_tokens has {} rows", split.sampled_logprobs.size(),
                split.rows);
  if (reader.find("sampled_ranks") != nullptr) {
    split.sampled_ranks = read_u32(reader, "sampled_ranks", 1, "U32 [N]");
    if (split.sampled_ranks->size() != split.rows)
      reader.fail("sampled_ranks has {} entries but top_tokens has {} rows", split.sampled_ranks->size(), split.rows);
  }
  return file;
}

}  // namespace

ResultData ResultFile::as_packed(const RaggedBatch& batch) const {
  return layout == ResultLayout::packed ? packed : packed_from_split(batch, split);
}

std::optional<std::uint64_t> ResultFile::shape_k() const {
  if (layout == ResultLayout::split) return split.k;
  return packed.width == 0 ? std::nullopt : std::optional<std::uint64_t>(packed.width - 1);
}

std::string ResultFile::shape_text() const {
  return layout == ResultLayout::packed ? fmt::format("lp_logits is [{}, {}]", packed.rows, packed.width)
                                        : fmt::format("top_tokens is [{}, {}]", split.rows, split.k);
}

BatchFile read_batch_file(const std::filesystem::path& path, MemoryBudget* budget) {
  SafetensorsReader reader(path, budget);
  BatchFile file;
  file.metadata = reader.metadata();
  file.k = parse_k(reader);
  BatchData& batch = file.batch;

  const TensorEntry& logits = reader.entry("logits", "F32, BF16 or F16 [rows, V]");
  reader.expect(logits, {"F32", "BF16", "F16"}, 2, "F32, BF16 or F16 [rows, V]");
  batch.rows = logits.shape[0];
  batch.vocab = logits.shape[1];
  batch.row_stride = batch.vocab;
  if (logits.dtype != "F32") batch.dtype = logits.dtype == "BF16" ? LogitsDtype::bf16 : LogitsDtype::f16;
  // The logits, the bulk of the file, are read in place: a copy would cost a page fault per page
  // of it and its size again in memory.
  SafetensorsReader::InPlace in_place = reader.in_place(logits);
  batch.mapped_logits = in_place.bytes;
  batch.logits_owner = std::move(in_place.owner);
  batch.tokens = read_u32(reader, "tokens", 1, "U32 [T]");
  batch.sampled_tokens = read_u32(reader, "sampled_tokens", 1, "U32 [B]");
  batch.logit_row_offsets = read_u32(reader, "logit_row_offsets", 1, "U32 [B+1]");
  batch.token_row_offsets = read_u32(reader, "token_row_offsets", 1, "U32 [B+1]");
  batch.lp_output_offsets = read_u32(reader, "lp_output_offsets", 1, "U32 [B+1]");
  if (const TensorEntry* t = reader.find("temperatures")) batch.temperatures = read_f32(reader, *t, 1, "F32 [B]");
  // A file may place its logits at any offset (SPEC §7), but the backends read them as float or
  // 16-bit arrays: misaligned ones are copied (rare, and a load through them is undefined).
  const std::size_t element = batch.dtype == LogitsDtype::f32 ? alignof(float) : alignof(std::uint16_t);
  if (reinterpret_cast<std::uintptr_t>(batch.mapped_logits.data()) % element != 0) batch.own_logits();
  return file;
}

ResultFile read_result_file(const std::filesystem::path& path, MemoryBudget* budget) {
  SafetensorsReader reader(path, budget);
  const bool packed = reader.find("lp_logits") != nullptr || reader.find("lp_tokens") != nullptr;
  const bool split = reader.find("top_tokens") != nullptr || reader.find("top_logprobs") != nullptr ||
                     reader.find("sampled_logprobs") != nullptr;
  if (!packed && !split)
    reader.fail(
        "is neither a packed result (lp_logits, lp_tokens) nor a split one (top_tokens, top_logprobs, "
        "sampled_logprobs)");
  if (packed)
    refuse_other_layout(reader, {"top_tokens", "top_logprobs", "sampled_logprobs", "sampled_ranks"}, "split", "packed",
                        reader.find("lp_logits") != nullptr ? "lp_logits" : "lp_tokens");
  else
    refuse_other_layout(reader, {"lp_logits", "lp_tokens", "lp_ranks"}, "packed", "split",
                        reader.find("top_tokens") != nullptr ? "top_tokens" : "top_logprobs");
  ResultFile file = packed ? read_packed(reader) : read_split(reader);
  file.metadata = reader.metadata();
  file.k = parse_k(reader);
  return file;
}

void write_batch_file(const std::filesystem::path& path, const BatchData& batch, std::optional<std::uint32_t> k,
                      const FileMetadata& metadata) {
  if (const auto given = metadata.find("k"); k && given != metadata.end() && given->second != std::to_string(*k))
    throw FileError(fmt::format("{}: k = {} but metadata k = '{}'; give one K; not written", path.string(), *k,
                                given->second));
  const std::uint64_t bytes = dtype_bytes(batch.dtype);
  const std::uint64_t stored = batch.logit_bytes().size() / bytes;
  if (batch.rows > 0 && stored < (batch.rows - 1) * batch.row_stride + batch.vocab)
    throw FileError(fmt::format("{}: batch has {} logits, too few for {} rows of stride {}", path.string(), stored,
                                batch.rows, batch.row_stride));
  // The file holds rows of exactly V logits: a batch with a wider stride is packed first.
  const std::byte* all = batch.logit_bytes().data();
  std::vector<std::byte> packed;
  std::span<const std::byte> logits(all, batch.rows * batch.vocab * bytes);
  if (batch.row_stride != batch.vocab) {
    packed.resize(logits.size());
    for (std::uint64_t i = 0; i < batch.rows; ++i)
      std::copy_n(all + i * batch.row_stride * bytes, batch.vocab * bytes,
                  packed.begin() + std::ptrdiff_t(i * batch.vocab * bytes));
    logits = packed;
  }
  std::vector<SafetensorsTensor> tensors = {
      {"logits", std::string(dtype_name(batch.dtype)), {batch.rows, batch.vocab}, logits},
      u32_tensor("tokens", batch.tokens),
      u32_tensor("sampled_tokens", batch.sampled_tokens),
      u32_tensor("logit_row_offsets", batch.logit_row_offsets),
      u32_tensor("token_row_offsets", batch.token_row_offsets),
      u32_tensor("lp_output_offsets", batch.lp_output_offsets),
  };
  if (batch.temperatures)
    tensors.push_back(
        tensor_of("temperatures", "F32", {batch.temperatures->size()}, std::span<const float>(*batch.temperatures)));
  FileMetadata all_metadata = metadata;
  if (k) all_metadata["k"] = std::to_string(*k);
  check_metadata(path, all_metadata);
  write_safetensors(path, tensors, all_metadata);
}

void write_result_file(const std::filesystem::path& path, const ResultData& result, const FileMetadata& metadata) {
  check_metadata(path, metadata);
  std::vector<SafetensorsTensor> tensors = {
      tensor_of("lp_logits", "F32", {result.rows, result.width}, std::span<const float>(result.lp_logits)),
      tensor_of("lp_tokens", "U32", {result.rows, result.width}, std::span<const std::uint32_t>(result.lp_tokens)),
  };
  if (result.ranks) tensors.push_back(u32_tensor("lp_ranks", result.lp_ranks));
  write_safetensors(path, tensors, metadata);
}

void write_split_result_file(const std::filesystem::path& path, const SplitResult& result,
                             const FileMetadata& metadata) {
  check_metadata(path, metadata);
  std::vector<SafetensorsTensor> tensors = {
      tensor_of("top_tokens", "U32", {result.rows, result.k}, std::span<const std::uint32_t>(result.top_tokens)),
      tensor_of("top_logprobs", "F32", {result.rows, result.k}, std::span<const float>(result.top_logprobs)),
      tensor_of("sampled_logprobs", "F32", {result.rows}, std::span<const float>(result.sampled_logprobs)),
  };
  if (result.sampled_ranks) tensors.push_back(u32_tensor("sampled_ranks", *result.sampled_ranks));
  write_safetensors(path, tensors, metadata);
}

}  // namespace logprobs
