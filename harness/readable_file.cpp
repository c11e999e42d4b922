#include "readable_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace logprobs {

ReadableFile::ReadableFile(const std::filesystem::path& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO without it waits for a writer, for ever; fstat then refuses it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw FileError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  const bool stat_failed = ::fstat(fd_, &st) != 0;
  const int error = errno;
  if (stat_failed || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw FileError(
        fmt::format("{}: cannot read: {}", path.string(), stat_failed ? std::strerror(error) : "not a regular file"));
  }
  size_ = std::uint64_t(st.st_size);
}

ReadableFile::~ReadableFile() { ::close(fd_); }

void ReadableFile::read_exact(std::uint64_t offset, void* into, std::uint64_t bytes) const {
  auto* out = static_cast<char*>(into);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw FileError(
          fmt::format("{}: read of {} bytes at offset {} failed ({})", path_.string(), bytes, offset,
                      n == 0 ? "the file is shorter than it was: changed while reading?" : std::strerror(errno)));
    done += std::uint64_t(n);
  }
}

MappedBytes::~MappedBytes() {
  if (size_ > 0) ::munmap(const_cast<void*>(data_), size_);
}

std::shared_ptr<const MappedBytes> ReadableFile::map() const {
  if (size_ == 0) return std::make_shared<const MappedBytes>(nullptr, 0);  // mmap refuses a length of 0
  void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd_, 0);
  if (data == MAP_FAILED)
    throw FileError(fmt::format("{}: cannot map its {} bytes: {}", path_.string(), size_, std::strerror(errno)));
  return std::make_shared<const MappedBytes>(data, size_);
}

std::string read_whole_file(const std::filesystem::path& path, MemoryBudget* budget) {
  const ReadableFile file(path);
  if (budget) budget->charge(file.size(), path.string());
  std::string text(file.size(), '\0');
  file.read_exact(0, text.data(), text.size());
  return text;
}

}  // namespace logprobs
