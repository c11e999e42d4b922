// The batch- and result-file loaders on arbitrary bytes. They may only return or throw
// FileError: never crash, read out of bounds, hang, or allocate more than the file could
// hold (ci/fuzz caps memory with -rss_limit_mb). A batch the loader accepts goes on through
// validate_batch, and a valid one through every host backend, as `logprobs-check run` would.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/batch_file.hpp"
#include "harness/host_backends.hpp"

namespace {

// The loaders read paths; an in-memory file gives them one without touching the disk.
class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) : fd_(::memfd_create("fuzz_batch_file", 0)) {
    if (fd_ < 0 || ::write(fd_, data, size) != static_cast<ssize_t>(size)) {
      std::perror("fuzz_batch_file: memfd");
      std::abort();
    }
  }
  ~MemoryFile() { ::close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace logprobs;
  const MemoryFile file(data, size);
  try {
    read_result_file(file.path());
  } catch (const FileError&) {
  }
  BatchFile loaded;
  try {
    loaded = read_batch_file(file.path());
  } catch (const FileError&) {
    return 0;
  }
  const int levels = loaded.levels.value_or(3);
  try {
    validate_batch(loaded.batch.view(), levels);
  } catch (const InvalidBatch&) {
    return 0;
  }
  for (const Backend* backend : available_host_backends()) run_backend(*backend, loaded.batch, levels);
  return 0;
}
