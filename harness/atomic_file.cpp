#include "atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string_view>

#include "writer_tag.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;

// The temporaries that exist now, for the signal handler to remove. A handler can only reach
// state that outlives every frame, so this one registry is global; it holds plain char arrays and
// lock-free atomics, the only things a handler may touch. A writer that finds every slot taken
// still works, without the cleanup on a signal.
constexpr int kSlots = 64;
enum SlotState : int { kFree, kClaimed, kReady };
struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free);

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];

void remove_temporaries_and_reraise(int signal) {
  const int saved_errno = errno;
  for (Slot& slot : g_slots)
    if (slot.state.load() == kReady) ::unlink(slot.path);
  // The disposition the program had before ours (the default one: terminate), so that the
  // process ends as the signal meant it to, with its exit status.
  for (std::size_t i = 0; i < std::size(kSignals); ++i)
    if (kSignals[i] == signal) ::sigaction(signal, &g_previous[i], nullptr);
  ::raise(signal);  // delivered when this handler returns, the signal being blocked until then
  errno = saved_errno;
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::size_t i = 0; i < std::size(kSignals); ++i) {
      struct sigaction previous {};
      if (::sigaction(kSignals[i], nullptr, &previous) != 0) continue;
      g_previous[i] = previous;
      if (previous.sa_handler == SIG_IGN) continue;  // a signal the program ignores (nohup) stays ignored
      struct sigaction action {};
      action.sa_handler = remove_temporaries_and_reraise;
      sigemptyset(&action.sa_mask);
      for (int s : kSignals) sigaddset(&action.sa_mask, s);  // one cleanup at a time
      action.sa_flags = SA_RESTART;
      ::sigaction(kSignals[i], &action, nullptr);
    }
  });
}

int register_temporary(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  install_handlers();
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kClaimed)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(kReady);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_slots[slot].state.store(kFree);
}

// 16 hex digits from the kernel's random source: a name nobody can plant a link or a FIFO at
// in advance (and O_EXCL refuses one that is there anyway).
std::string random_suffix() {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != sizeof bits)
    bits = std::uint64_t{std::random_device{}()} << 32 ^ std::random_device{}();
  return fmt::format("{:016x}", bits);
}

// Each write() at most this long, so that a signal during a long write is handled soon after it
// arrives (a regular file's write() runs to its end before the handler).
constexpr std::size_t kWriteChunk = std::size_t{16} << 20;

// Set (to anything but "0" or ""), every file is written through a named temporary, as on a file
// system without O_TMPFILE: for the tests of that path.
constexpr const char* kNamedEnv = "LOGPROBS_ATOMIC_FILE_NAMED";

bool named_forced() {
  const char* value = std::getenv(kNamedEnv);
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

}  // namespace

AtomicFile::AtomicFile(const fs::path& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw FileError(fmt::format("{}: exists and is not a regular file; refusing to replace it", path.string()));
  folder_ = path.has_parent_path() ? path.parent_path() : fs::path(".");
  // What writers killed without a chance to clean up (kill -9, a CI hard timeout) left here.
  remove_stale_temporaries(folder_);
  // An unnamed file needs /proc/self/fd to be linked into place without privileges.
  if (!named_forced() && ::access("/proc/self/fd", X_OK) == 0) {
    fd_ = ::open(folder_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    const int error = errno;
    // EOPNOTSUPP: the file system has no O_TMPFILE; EISDIR and EINVAL: the kernel or C library.
    if (error != EOPNOTSUPP && error != EISDIR && error != EINVAL)
      throw FileError(fmt::format("{}: cannot create a temporary file in {}: {}", path.string(), folder_.string(),
                                  std::strerror(error)));
  }
  create_named(O_WRONLY);
}

// The name of a named temporary: ".<stem>.<writer's tag>.<16 hex>.tmp", the stem cut so that the
// name stays within NAME_MAX.
fs::path AtomicFile::fresh_name() const {
  const std::optional<std::string> tag = writer_tag();
  const std::string stem = path_.filename().string().substr(0, 150);
  return folder_ / (tag ? fmt::format(".{}.{}.{}.tmp", stem, *tag, random_suffix())
                        : fmt::format(".{}.{}.tmp", stem, random_suffix()));
}

void AtomicFile::create_named(int flags) {
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temporary_ = fresh_name();
    // Registered before it exists: a signal between the creation and a later registration would
    // find the file and no record of it.
    slot_ = register_temporary(temporary_.string());
    fd_ = ::open(temporary_.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    const int error = errno;
    unregister_temporary(slot_);  // the name is not ours (EEXIST) or cannot be created
    slot_ = -1;
    if (error != EEXIST) {
      const std::string name = temporary_.string();
      temporary_.clear();
      throw FileError(
          fmt::format("{}: cannot create temporary file {}: {}", path_.string(), name, std::strerror(error)));
    }
  }
  if (fd_ < 0) {
    temporary_.clear();
    throw FileError(fmt::format("{}: cannot create a temporary file beside it", path_.string()));
  }
}

// The unnamed file linked under a fresh name beside the target, for rename to put in place:
// linkat never replaces a name, and rename does so atomically. Between the two the name is
// registered (a signal removes it) and tagged (a later writer removes it after a kill -9).
void AtomicFile::link_unnamed() {
  const std::string self = fmt::format("/proc/self/fd/{}", fd_);
  for (int attempt = 0; attempt < 16; ++attempt) {
    temporary_ = fresh_name();
    slot_ = register_temporary(temporary_.string());
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temporary_.c_str(), AT_SYMLINK_FOLLOW) == 0) return;
    const int error = errno;
    unregister_temporary(slot_);
    slot_ = -1;
    const fs::path tried = std::move(temporary_);
    temporary_.clear();
    if (error != EEXIST) {
      errno = error;
      fail(fmt::format("cannot link the temporary file into {} as {}", folder_.string(), tried.string()));
    }
  }
  errno = EEXIST;
  fail("cannot link the temporary file into its folder");
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  unregister_temporary(slot_);
  slot_ = -1;
  temporary_.clear();
}

void AtomicFile::fail(std::string_view what) {
  const int error = errno;
  const std::string message =
      temporary_.empty()
          ? fmt::format("{}: {} (unnamed temporary file in {}): {}", path_.string(), what, folder_.string(),
                        std::strerror(error))
          : fmt::format("{}: {} (temporary file {}): {}", path_.string(), what, temporary_.string(),
                        std::strerror(error));
  discard();
  throw FileError(message);
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw FileError(fmt::format("{}: write after commit or failure", path_.string()));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), std::min(bytes.size(), kWriteChunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed");
    bytes = bytes.subspan(std::size_t(n));
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw FileError(fmt::format("{}: commit after commit or failure", path_.string()));
  // On disk before its name is: a crash after the rename finds the whole file, not an empty one.
  if (::fsync(fd_) != 0) fail("fsync failed");
  if (temporary_.empty()) link_unnamed();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed");
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file into place");
  // Renamed: the temporary's name is gone, so nothing is left to remove.
  unregister_temporary(slot_);
  slot_ = -1;
  temporary_.clear();
}

void write_file_atomically(const fs::path& path, std::string_view contents) {
  AtomicFile file(path);
  file.write(contents);
  file.commit();
}

}  // namespace logprobs
