// Files written whole or not at all: under a temporary name in the target's folder, renamed into
// place at the end. The temporary is created exclusively under an unpredictable name (so a link
// or a FIFO planted there is never opened), and removed when writing fails, when the writer is
// destroyed uncommitted, and when SIGINT, SIGTERM or SIGHUP ends the process mid-write.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

#include "file_error.hpp"

namespace logprobs {

class AtomicFile {
 public:
  // Creates the temporary beside `path`. Throws FileError when the folder cannot take it, or when
  // `path` exists and is not a regular file (a FIFO, a device, a folder): such a path is refused,
  // not replaced. A symbolic link at `path` is replaced by the file, never written through.
  explicit AtomicFile(const std::filesystem::path& path);
  ~AtomicFile();  // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `bytes`; throws FileError (a full disk, an I/O error) after removing the temporary.
  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span<const char>(text.data(), text.size()))); }

  // Closes the temporary and renames it to the path; throws FileError after removing it.
  void commit();

  const std::filesystem::path& temporary_path() const { return temporary_; }

 private:
  [[noreturn]] void fail(std::string_view what);
  void discard() noexcept;

  std::filesystem::path path_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  int slot_ = -1;  // in the registry of temporaries the signal handler removes
};

// `contents` as the whole file at `path`, through AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace logprobs
