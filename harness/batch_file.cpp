#include "batch_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

namespace logprobs {

// The raw bytes are copied as they lie; safetensors data is little-endian.
static_assert(std::endian::native == std::endian::little, "batch files assume a little-endian host");

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The safetensors reference implementation refuses headers above 100 MB; so do we, which also
// bounds what a hostile header length can make us allocate.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  std::string_view name;
  std::uint64_t size;
};
// Every dtype safetensors defines, so that a known-but-wrong dtype and an unknown one get
// different messages.
constexpr DtypeInfo kDtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                 {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                                 {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

std::optional<std::uint64_t> dtype_size(std::string_view dtype) {
  for (const DtypeInfo& d : kDtypes)
    if (d.name == dtype) return d.size;
  return std::nullopt;
}

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section
  std::uint64_t end = 0;
};

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// An open safetensors file whose header has been checked against the file's size: every entry's
// byte range lies inside the data section and matches its dtype and shape, so reading an entry
// allocates no more than the file holds.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const fs::path& path) : path_(path) {
    std::error_code ec;
    const std::uint64_t file_size = fs::file_size(path, ec);
    if (ec) fail("cannot read: {}", ec.message());
    in_.open(path, std::ios::binary);
    if (!in_) fail("cannot open for reading");
    if (file_size < 8) fail("file is {} bytes, shorter than the 8-byte header length", file_size);

    unsigned char length_bytes[8];
    read_exact(0, length_bytes, 8);
    std::uint64_t header_length = 0;
    std::memcpy(&header_length, length_bytes, 8);
    if (header_length > file_size - 8)
      fail("header length {} runs past the end of the file ({} bytes after the 8-byte length)", header_length,
           file_size - 8);
    if (header_length > kMaxHeaderBytes) fail("header length {} exceeds the {}-byte limit", header_length, kMaxHeaderBytes);
    data_start_ = 8 + header_length;
    data_size_ = file_size - data_start_;

    std::string header(header_length, '\0');
    read_exact(8, header.data(), header_length);
    parse_header(header);
  }

  const FileMetadata& metadata() const { return metadata_; }

  const Entry& entry(std::string_view name, std::string_view expected) const {
    for (const Entry& e : entries_)
      if (e.name == name) return e;
    fail("missing tensor '{}' (expected {})", name, expected);
  }

  template <typename T>
  std::vector<T> read_as(const Entry& e) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::uint64_t bytes = e.end - e.begin;  // == product(shape) * sizeof(T), checked in the header
    std::vector<T> values(bytes / sizeof(T));
    read_exact(data_start_ + e.begin, values.data(), bytes);
    return values;
  }

  void expect(const Entry& e, std::initializer_list<std::string_view> dtypes, std::size_t rank,
              std::string_view expected) const {
    if (std::find(dtypes.begin(), dtypes.end(), e.dtype) == dtypes.end())
      fail("tensor '{}' has dtype {}, expected {}", e.name, e.dtype, expected);
    if (e.shape.size() != rank)
      fail("tensor '{}' has shape {} of rank {}, expected rank {} ({})", e.name, shape_text(e.shape), e.shape.size(),
           rank, expected);
  }

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw BatchFileError(fmt::format("{}: {}", path_.string(), fmt::format(format, std::forward<Args>(args)...)));
  }

 private:
  void read_exact(std::uint64_t offset, void* into, std::uint64_t bytes) {
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(into), static_cast<std::streamsize>(bytes));
    if (!in_ || static_cast<std::uint64_t>(in_.gcount()) != bytes)
      fail("read of {} bytes at offset {} failed (file changed while reading?)", bytes, offset);
  }

  void parse_header(const std::string& text) {
    json header;
    try {
      header = json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double
      fail("header is not valid JSON: {}", e.what());
    }
    if (!header.is_object()) fail("header is JSON {}, expected an object of tensors", header.type_name());
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        parse_metadata(value);
      } else {
        entries_.push_back(parse_entry(name, value));
      }
    }
    check_layout();
  }

  void parse_metadata(const json& value) {
    if (!value.is_object()) fail("__metadata__ is JSON {}, expected an object of strings", value.type_name());
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) fail("__metadata__ entry '{}' is JSON {}, expected a string", key, item.type_name());
      metadata_[key] = item.get<std::string>();
    }
  }

  Entry parse_entry(const std::string& name, const json& value) const {
    if (!value.is_object()) fail("tensor '{}' is JSON {}, expected an object", name, value.type_name());
    Entry e;
    e.name = name;
    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) fail("tensor '{}' has no string 'dtype'", name);
    e.dtype = dtype->get<std::string>();
    const std::optional<std::uint64_t> element_size = dtype_size(e.dtype);
    if (!element_size) fail("tensor '{}' has unknown dtype '{}'", name, e.dtype);

    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) fail("tensor '{}' has no 'shape' array", name);
    for (const json& dim : *shape) {
      if (!dim.is_number_unsigned()) fail("tensor '{}' has shape entry {}, expected a non-negative integer", name, dim.dump());
      e.shape.push_back(dim.get<std::uint64_t>());
    }

    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      fail("tensor '{}' has no 'data_offsets' [begin, end] of non-negative integers", name);
    e.begin = (*offsets)[0].get<std::uint64_t>();
    e.end = (*offsets)[1].get<std::uint64_t>();
    if (e.begin > e.end) fail("tensor '{}' has data_offsets [{}, {}] out of order (begin > end)", name, e.begin, e.end);
    if (e.end > data_size_)
      fail("tensor '{}' has data_offsets [{}, {}] past the end of the data ({} bytes)", name, e.begin, e.end, data_size_);

    std::uint64_t bytes = *element_size;
    for (std::uint64_t dim : e.shape)
      if (__builtin_mul_overflow(bytes, dim, &bytes))
        fail("tensor '{}' has shape {} whose size overflows 64 bits", name, shape_text(e.shape));
    if (bytes != e.end - e.begin)
      fail("tensor '{}' of dtype {} and shape {} needs {} bytes but data_offsets [{}, {}] hold {}", name, e.dtype,
           shape_text(e.shape), bytes, e.begin, e.end, e.end - e.begin);
    return e;
  }

  // Tensors may lie in any order and with gaps between them, but never overlap.
  void check_layout() const {
    std::vector<const Entry*> by_begin;
    for (const Entry& e : entries_) by_begin.push_back(&e);
    std::sort(by_begin.begin(), by_begin.end(), [](const Entry* a, const Entry* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    for (std::size_t i = 1; i < by_begin.size(); ++i) {
      const Entry& prev = *by_begin[i - 1];
      const Entry& next = *by_begin[i];
      if (next.begin < prev.end && next.begin != next.end && prev.begin != prev.end)
        fail("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", prev.name, prev.begin, prev.end, next.name, next.begin,
             next.end);
    }
  }

  fs::path path_;
  std::ifstream in_;
  std::uint64_t data_start_ = 0;
  std::uint64_t data_size_ = 0;
  std::vector<Entry> entries_;
  FileMetadata metadata_;
};

std::optional<int> parse_levels(const SafetensorsReader& reader, const FileMetadata& metadata) {
  const auto it = metadata.find("levels");
  if (it == metadata.end()) return std::nullopt;
  const std::string& text = it->second;
  int levels = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), levels);
  if (ec != std::errc() || end != text.data() + text.size() || levels < 0 || levels > kMaxLevels)
    reader.fail("metadata levels = '{}' is not an integer in 0..{}", text, kMaxLevels);
  return levels;
}

template <typename T>
std::vector<std::byte> as_bytes(std::span<const T> values) {
  std::vector<std::byte> bytes(values.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

SafetensorsTensor u32_tensor(std::string name, std::span<const std::uint32_t> values) {
  return {std::move(name), "U32", {values.size()}, as_bytes(values)};
}

}  // namespace

float bf16_to_f32(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

BatchFile read_batch_file(const fs::path& path) {
  SafetensorsReader reader(path);
  BatchFile file;
  file.metadata = reader.metadata();
  file.levels = parse_levels(reader, file.metadata);
  BatchData& batch = file.batch;

  const Entry& logits = reader.entry("logits", "F32, BF16 or F16 [rows, V]");
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
    const Entry& e = reader.entry(name, expected);
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

ResultFile read_result_file(const fs::path& path) {
  SafetensorsReader reader(path);
  const Entry& logits = reader.entry("lp_logits", "F32 [N, W]");
  reader.expect(logits, {"F32"}, 2, "F32 [N, W]");
  const Entry& tokens = reader.entry("lp_tokens", "U32 [N, W]");
  reader.expect(tokens, {"U32"}, 2, "U32 [N, W]");
  if (logits.shape != tokens.shape)
    reader.fail("lp_logits has shape {} but lp_tokens has shape {}; both must be [N, W]", shape_text(logits.shape),
                shape_text(tokens.shape));
  ResultFile file;
  file.metadata = reader.metadata();
  file.levels = parse_levels(reader, file.metadata);
  file.result.rows = logits.shape[0];
  file.result.width = logits.shape[1];
  file.result.lp_logits = reader.read_as<float>(logits);
  file.result.lp_tokens = reader.read_as<std::uint32_t>(tokens);
  return file;
}

void write_safetensors(const fs::path& path, std::span<const SafetensorsTensor> tensors, const FileMetadata& metadata) {
  const auto fail = [&](std::string_view what) { throw BatchFileError(fmt::format("{}: {}", path.string(), what)); };

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    const std::optional<std::uint64_t> element_size = dtype_size(t.dtype);
    if (!element_size) fail(fmt::format("tensor '{}': unknown dtype '{}'", t.name, t.dtype));
    std::uint64_t bytes = *element_size;
    for (std::uint64_t dim : t.shape)
      if (__builtin_mul_overflow(bytes, dim, &bytes)) fail(fmt::format("tensor '{}': shape overflows", t.name));
    if (bytes != t.data.size())
      fail(fmt::format("tensor '{}': shape {} needs {} bytes, data has {}", t.name, shape_text(t.shape), bytes,
                       t.data.size()));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  // Padding the header to 8 bytes keeps the data aligned for readers that map the file.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const std::uint64_t header_length = header_text.size();

  const fs::path temp = path.parent_path() / fmt::format(".{}.tmp-{}", path.filename().string(), ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail(fmt::format("cannot create temporary file {}", temp.string()));
    out.write(reinterpret_cast<const char*>(&header_length), 8);
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (const SafetensorsTensor& t : tensors)
      out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temp, ignored);
      fail(fmt::format("write to temporary file {} failed", temp.string()));
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    fail(fmt::format("cannot rename {} into place: {}", temp.string(), ec.message()));
  }
}

void write_batch_file(const fs::path& path, const BatchData& batch, std::optional<int> levels,
                      const FileMetadata& metadata) {
  if (batch.rows > 0 && batch.logits.size() < (batch.rows - 1) * batch.row_stride + batch.vocab)
    throw BatchFileError(fmt::format("{}: batch has {} logits, too few for {} rows of stride {}", path.string(),
                                     batch.logits.size(), batch.rows, batch.row_stride));
  std::vector<float> logits(batch.rows * batch.vocab);
  for (std::uint64_t i = 0; i < batch.rows; ++i)
    std::copy_n(batch.logits.begin() + static_cast<std::ptrdiff_t>(i * batch.row_stride), batch.vocab,
                logits.begin() + static_cast<std::ptrdiff_t>(i * batch.vocab));
  const std::vector<SafetensorsTensor> tensors = {
      {"logits", "F32", {batch.rows, batch.vocab}, as_bytes(std::span<const float>(logits))},
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

void write_result_file(const fs::path& path, const ResultData& result, const FileMetadata& metadata) {
  const std::vector<SafetensorsTensor> tensors = {
      {"lp_logits", "F32", {result.rows, result.width}, as_bytes(std::span<const float>(result.lp_logits))},
      {"lp_tokens", "U32", {result.rows, result.width}, as_bytes(std::span<const std::uint32_t>(result.lp_tokens))},
  };
  write_safetensors(path, tensors, metadata);
}

}  // namespace logprobs
