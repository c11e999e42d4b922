#include "safetensors.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "bounded_json.hpp"

namespace logprobs {

// The raw bytes are copied as they lie; safetensors data is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors files assume a little-endian host");

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

// The header's tensors and metadata, each checked against the data section's size.
class HeaderParser {
 public:
  HeaderParser(const SafetensorsReader& reader, std::uint64_t data_size, MemoryBudget* budget, std::string_view path)
      : reader_(reader), data_size_(data_size), budget_(budget), path_(path) {}

  void parse(const std::string& text, std::vector<TensorEntry>& entries, FileMetadata& metadata) const {
    check_framing(text);
    json header;
    try {
      header = parse_bounded_json(text, budget_, fmt::format("{}: the header", path_),
                                  [this](const std::string& reason) { reader_.fail("header {}", reason); });
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double
      reader_.fail("header is not valid JSON: {}", e.what());
    }
    if (text[text.find_last_not_of(' ')] != '}')
      reader_.fail("header has bytes other than spaces after its JSON object (the format pads with spaces only)");
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        parse_metadata(value, metadata);
      } else {
        entries.push_back(parse_entry(name, value));
      }
    }
    check_layout(entries);
  }

 private:
  // What JSON alone does not refuse, or nlohmann lets through: it skips a byte-order mark and
  // stops at a NUL as if the text ended there. A first byte that is not ASCII is named by its
  // value: as JSON text it would not be UTF-8.
  void check_framing(const std::string& text) const {
    if (text.starts_with("\xEF\xBB\xBF"))
      reader_.fail("header starts with a UTF-8 byte-order mark, which the format forbids");
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
      reader_.fail("header has a NUL byte at offset {} (a reader that stops there would ignore what follows)", nul);
    if (text.empty() || text[0] != '{')
      reader_.fail("header starts with {}, expected an object of tensors ('{{')",
                   text.empty()                   ? std::string("nothing")
                   : std::uint8_t(text[0]) < 0x80 ? json(text.substr(0, 1)).dump()
                                                  : fmt::format("byte 0x{:02x}", std::uint8_t(text[0])));
  }

  void parse_metadata(const json& value, FileMetadata& metadata) const {
    if (!value.is_object()) reader_.fail("__metadata__ is JSON {}, expected an object of strings", value.type_name());
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string())
        reader_.fail("__metadata__ entry '{}' is JSON {}, expected a string", key, item.type_name());
      metadata[key] = item.get<std::string>();
    }
  }

  TensorEntry parse_entry(const std::string& name, const json& value) const {
    if (!value.is_object()) reader_.fail("tensor '{}' is JSON {}, expected an object", name, value.type_name());
    TensorEntry e;
    e.name = name;
    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) reader_.fail("tensor '{}' has no string 'dtype'", name);
    e.dtype = dtype->get<std::string>();
    const std::optional<std::uint64_t> element_size = dtype_size(e.dtype);
    if (!element_size) reader_.fail("tensor '{}' has unknown dtype '{}'", name, e.dtype);

    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) reader_.fail("tensor '{}' has no 'shape' array", name);
    for (const json& dim : *shape) {
      if (!dim.is_number_unsigned())
        reader_.fail("tensor '{}' has shape entry {}, expected a non-negative integer", name, dim.dump());
      e.shape.push_back(dim.get<std::uint64_t>());
    }

    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      reader_.fail("tensor '{}' has no 'data_offsets' [begin, end] of non-negative integers", name);
    e.begin = (*offsets)[0].get<std::uint64_t>();
    e.end = (*offsets)[1].get<std::uint64_t>();
    if (e.begin > e.end)
      reader_.fail("tensor '{}' has data_offsets [{}, {}] out of order (begin > end)", name, e.begin, e.end);
    if (e.end > data_size_)
      reader_.fail("tensor '{}' has data_offsets [{}, {}] past the end of the data ({} bytes)", name, e.begin, e.end,
                   data_size_);

    std::uint64_t bytes = *element_size;
    for (std::uint64_t dim : e.shape)
      if (__builtin_mul_overflow(bytes, dim, &bytes))
        reader_.fail("tensor '{}' has shape {} whose size overflows 64 bits", name, shape_text(e.shape));
    if (bytes != e.end - e.begin)
      reader_.fail("tensor '{}' of dtype {} and shape {} needs {} bytes but data_offsets [{}, {}] hold {}", name,
                   e.dtype, shape_text(e.shape), bytes, e.begin, e.end, e.end - e.begin);
    return e;
  }

  // Tensors may lie in any order and with gaps between them, but no two non-empty ones overlap.
  // Empty tensors hold no bytes, so they are left out before sorting: kept in, one between two
  // overlapping tensors would make them no longer neighbours. Among non-empty ranges sorted by
  // begin, neighbours not overlapping means none do.
  void check_layout(const std::vector<TensorEntry>& entries) const {
    std::vector<const TensorEntry*> by_begin;
    for (const TensorEntry& e : entries)
      if (e.begin != e.end) by_begin.push_back(&e);
    std::sort(by_begin.begin(), by_begin.end(),
              [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
    for (std::size_t i = 1; i < by_begin.size(); ++i) {
      const TensorEntry& prev = *by_begin[i - 1];
      const TensorEntry& next = *by_begin[i];
      if (next.begin < prev.end)
        reader_.fail("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", prev.name, prev.begin, prev.end, next.name,
                     next.begin, next.end);
    }
  }

  const SafetensorsReader& reader_;
  std::uint64_t data_size_;
  MemoryBudget* budget_;
  std::string_view path_;
};

}  // namespace

std::optional<std::uint64_t> dtype_size(std::string_view dtype) {
  for (const DtypeInfo& d : kDtypes)
    if (d.name == dtype) return d.size;
  return std::nullopt;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SafetensorsReader::SafetensorsReader(const fs::path& path, MemoryBudget* budget)
    : path_(path), budget_(budget), file_(path) {
  const std::uint64_t file_size = file_.size();
  if (file_size < 8) fail("file is {} bytes, shorter than the 8-byte header length", file_size);

  unsigned char length_bytes[8];
  file_.read_exact(0, length_bytes, 8);
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, length_bytes, 8);
  if (header_length > file_size - 8)
    fail("header length {} runs past the end of the file ({} bytes after the 8-byte length)", header_length,
         file_size - 8);
  if (header_length > kMaxHeaderBytes)
    fail("header length {} exceeds the {}-byte limit", header_length, kMaxHeaderBytes);
  data_start_ = 8 + header_length;
  data_size_ = file_size - data_start_;

  if (budget_) budget_->charge(header_length, fmt::format("{}: the header", path_.string()));
  std::string header(header_length, '\0');
  file_.read_exact(8, header.data(), header_length);
  HeaderParser(*this, data_size_, budget_, path_.native()).parse(header, entries_, metadata_);
}

const TensorEntry* SafetensorsReader::find(std::string_view name) const {
  for (const TensorEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const TensorEntry& SafetensorsReader::entry(std::string_view name, std::string_view expected) const {
  const TensorEntry* e = find(name);
  if (e == nullptr) fail("missing tensor '{}' (expected {})", name, expected);
  return *e;
}

void SafetensorsReader::expect(const TensorEntry& e, std::initializer_list<std::string_view> dtypes, std::size_t rank,
                               std::string_view expected) const {
  if (std::find(dtypes.begin(), dtypes.end(), e.dtype) == dtypes.end())
    fail("tensor '{}' has dtype {}, expected {}", e.name, e.dtype, expected);
  if (e.shape.size() != rank)
    fail("tensor '{}' has shape {} of rank {}, expected rank {} ({})", e.name, shape_text(e.shape), e.shape.size(),
         rank, expected);
}

SafetensorsReader::InPlace SafetensorsReader::in_place(const TensorEntry& e) {
  charge(e.end - e.begin, e);
  if (!mapping_) mapping_ = file_.map();
  // The header's check against the file's size keeps the range inside the mapping.
  return {mapping_, mapping_->bytes().subspan(data_start_ + e.begin, e.end - e.begin)};
}

void SafetensorsReader::fail_with(const std::string& message) const {
  throw FileError(fmt::format("{}: {}", path_.string(), message));
}

void SafetensorsReader::charge(std::uint64_t bytes, const TensorEntry& e) {
  if (budget_)
    budget_->charge(bytes,
                    fmt::format("{}: tensor '{}' ({} {})", path_.string(), e.name, e.dtype, shape_text(e.shape)));
}

void write_safetensors(const fs::path& path, std::span<const SafetensorsTensor> tensors, const FileMetadata& metadata) {
  const auto fail = [&](std::string_view what) { throw FileError(fmt::format("{}: {}", path.string(), what)); };

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
    if (header.contains(t.name)) fail(fmt::format("tensor '{}' given twice", t.name));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  // A name or metadata string that is not UTF-8 cannot be JSON text: refused, not rewritten.
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const json::type_error& e) {
    fail(fmt::format("a tensor name or metadata string is not valid UTF-8 ({})", e.what()));
  }
  // Padding the header to 8 bytes keeps the data aligned for readers that map the file.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const std::uint64_t header_length = header_text.size();

  AtomicFile out(path);
  out.write(std::as_bytes(std::span<const std::uint64_t>(&header_length, 1)));
  out.write(header_text);
  for (const SafetensorsTensor& t : tensors) out.write(t.data);
  out.commit();
}

}  // namespace logprobs
