// Reading files the harness did not write (batches, results, a campaign's reports): only a
// regular file is opened, and never in a way that waits (a FIFO would block the open until
// someone writes to it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "file_error.hpp"
#include "memory_budget.hpp"

namespace logprobs {

// A whole file's bytes, mapped read-only into memory and unmapped when destroyed.
class MappedBytes {
 public:
  MappedBytes(const void* data, std::uint64_t size) : data_(data), size_(size) {}
  ~MappedBytes();
  MappedBytes(const MappedBytes&) = delete;
  MappedBytes& operator=(const MappedBytes&) = delete;
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

 private:
  const void* data_;
  std::uint64_t size_;
};

// An open regular file, closed when destroyed. Errors are FileErrors whose message starts with
// the path.
class ReadableFile {
 public:
  explicit ReadableFile(const std::filesystem::path& path);
  ~ReadableFile();
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;

  std::uint64_t size() const { return size_; }
  // Exactly `bytes` at `offset`, or a FileError (the file shrank since it was opened, an I/O error).
  void read_exact(std::uint64_t offset, void* into, std::uint64_t bytes) const;
  // The whole file mapped read-only, its pages read in at once (it is about to be read through):
  // the bulk of a file read in place rather than copied. A file shortened while mapped would make
  // a read past its new end fault (SIGBUS) where a copy reports an error; the harness's writers
  // never shorten a file in place (they rename a new one over it: atomic_file.hpp).
  std::shared_ptr<const MappedBytes> map() const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The whole file, its size counted against `budget` (when given) before it is read.
std::string read_whole_file(const std::filesystem::path& path, MemoryBudget* budget);

}  // namespace logprobs
