// The batch- and result-file loaders on arbitrary bytes. They may only return or throw
// FileError: never crash, read out of bounds, hang, or allocate more than the file could
// hold (ci/fuzz caps memory with -rss_limit_mb). A batch the loader accepts goes on through
// validate_batch, and a valid one through every host backend, as `logprobs-check run` would.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "harness/batch_file.hpp"
#include "harness/comparator.hpp"
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

// Outputs of at most this many slots are computed (a file of a few kilobytes may ask for K = 65535).
constexpr std::uint64_t kMaxOutputSlots = std::uint64_t{1} << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace logprobs;
  const MemoryFile file(data, size);
  std::optional<ResultFile> result;
  try {
    result = read_result_file(file.path());
  } catch (const FileError&) {
  }
  BatchFile loaded;
  try {
    loaded = read_batch_file(file.path());
  } catch (const FileError&) {
    return 0;
  }
  const std::uint32_t k = loaded.k.value_or(3);
  OutputShape shape;
  try {
    shape = validate_batch(loaded.batch.view(), k);
  } catch (const InvalidBatch&) {
    return 0;
  }
  if (shape.rows * shape.width > kMaxOutputSlots) return 0;
  const ResultData reference = run_backend(reference_backend(), loaded.batch, k, /*ranks=*/true);
  for (const Backend* backend : available_host_backends())
    if (missing_part(backend->features(), loaded.batch.view(), k, false).empty())
      run_backend(*backend, loaded.batch, k);
  // A file that is a valid batch and a result too (a split result beside the batch's tensors, say)
  // is judged as `verify` would: any shape, any tokens, never a crash.
  if (result) compare_result(loaded.batch, k, reference, result->as_packed(loaded.batch.view()));
  return 0;
}
