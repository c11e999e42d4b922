// The safetensors container: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then the raw
// little-endian tensor bytes. Reading is strict where the format is (no duplicate keys, no
// bytes but spaces after the header's JSON, no byte-order mark) and checks every size against
// the file, and against a memory budget when given one, before anything is allocated; writing is
// atomic (atomic_file.hpp). Knows nothing of batches: batch_file.hpp maps SPEC §7 onto it.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "file_error.hpp"
#include "memory_budget.hpp"
#include "readable_file.hpp"

namespace logprobs {

using FileMetadata = std::map<std::string, std::string>;

// The byte size of one element of a safetensors dtype ("F32", "BF16", ...), or nothing for an
// unknown dtype.
std::optional<std::uint64_t> dtype_size(std::string_view dtype);

// One tensor as the header describes it.
struct TensorEntry {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section
  std::uint64_t end = 0;
};

std::string shape_text(const std::vector<std::uint64_t>& shape);

// An open safetensors file whose header has been checked against the file's size: every entry's
// byte range lies inside the data section, matches its dtype and shape and overlaps no other
// non-empty one, so reading an entry allocates no more than the file holds. With a budget, the
// header and each entry read are counted against it first (MemoryBudgetExceeded). Only a regular
// file is opened (a FIFO would block the open until someone writes to it).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::filesystem::path& path, MemoryBudget* budget = nullptr);

  const FileMetadata& metadata() const { return metadata_; }
  const TensorEntry* find(std::string_view name) const;
  // The entry, or a FileError naming it and what was expected of it.
  const TensorEntry& entry(std::string_view name, std::string_view expected) const;
  // A FileError unless the entry has one of `dtypes` and rank `rank`.
  void expect(const TensorEntry& e, std::initializer_list<std::string_view> dtypes, std::size_t rank,
              std::string_view expected) const;

  template <typename T>
  std::vector<T> read_as(const TensorEntry& e) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::uint64_t bytes = e.end - e.begin;  // == product(shape) * dtype size, checked in the header
    charge(bytes, e);
    std::vector<T> values(bytes / sizeof(T));
    file_.read_exact(data_start_ + e.begin, values.data(), bytes);
    return values;
  }

  // The entry's bytes in place, in the file mapped read-only (once per reader), with the owner
  // that keeps the mapping alive. Counted against the budget as read_as counts its copy: the
  // pages are this process's memory once read.
  struct InPlace {
    std::shared_ptr<const void> owner;
    std::span<const std::byte> bytes;
  };
  InPlace in_place(const TensorEntry& e);

  // Throws FileError with the path, then the message.
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    fail_with(fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  [[noreturn]] void fail_with(const std::string& message) const;
  void charge(std::uint64_t bytes, const TensorEntry& e);

  std::filesystem::path path_;
  MemoryBudget* budget_;
  ReadableFile file_;  // a member, so that it is closed also when the constructor throws
  std::shared_ptr<const MappedBytes> mapping_;  // the whole file, once an entry is read in place
  std::uint64_t data_start_ = 0;
  std::uint64_t data_size_ = 0;
  std::vector<TensorEntry> entries_;
  FileMetadata metadata_;
};

// A tensor to write: `data` is exactly product(shape) * dtype size little-endian bytes, viewed
// (the caller keeps it alive while write_safetensors runs).
struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "U32", "BF16", "F16", ...
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> data;
};

template <typename T>
SafetensorsTensor tensor_of(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                            std::span<const T> values) {
  return {std::move(name), std::move(dtype), std::move(shape), std::as_bytes(values)};
}

// Writes the tensors in order, atomically (AtomicFile: a reader never sees half a file, and a
// failed or interrupted write leaves none), straight from the views. Throws FileError.
void write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsTensor> tensors,
                       const FileMetadata& metadata);

}  // namespace logprobs
