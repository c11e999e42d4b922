// Files written whole or not at all, and no temporary outliving its writer, even one killed by
// SIGKILL (a CI hard timeout, the OOM killer).
//
// Where the file system allows it (tmpfs, ext4, xfs, btrfs, overlayfs), the file is written
// unnamed: open(folder, O_TMPFILE), so a writer killed mid-write leaves nothing (the kernel
// frees an inode no name holds). At commit it is fsynced, linked (linkat of /proc/self/fd/N)
// under a fresh name beside the target and renamed over it: linkat cannot replace a name, and
// rename replaces the target atomically, so a reader sees the old file or the new one.
//
// Elsewhere (EOPNOTSUPP, EISDIR, EINVAL from O_TMPFILE; no /proc/self/fd; or the environment
// variable LOGPROBS_ATOMIC_FILE_NAMED=1, which the tests set to reach this path), it is written
// under a named temporary created exclusively under an unpredictable name (a link or a FIFO
// planted there is never opened), fsynced and renamed into place. The name carries the writer's
// tag (writer_tag.hpp: pid, start time, pid namespace, boot, host), so that every writer first
// removes from its folder the temporaries of writers that are dead; and it is removed when
// writing fails, when the writer is destroyed uncommitted, and when SIGINT, SIGTERM or SIGHUP
// ends the process mid-write. The fresh name of the unnamed path's link is tagged and
// registered too, for the instant between linkat and rename.
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

  // The named temporary being written; empty while the file is unnamed (O_TMPFILE).
  const std::filesystem::path& temporary_path() const { return temporary_; }

 private:
  [[noreturn]] void fail(std::string_view what);
  void discard() noexcept;
  std::filesystem::path fresh_name() const;
  void create_named(int flags);
  void link_unnamed();

  std::filesystem::path path_;
  std::filesystem::path folder_;
  std::filesystem::path temporary_;  // empty while unnamed
  int fd_ = -1;
  int slot_ = -1;  // in the registry of temporaries the signal handler removes
};

// `contents` as the whole file at `path`, through AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace logprobs
