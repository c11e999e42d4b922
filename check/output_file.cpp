#include "output_file.hpp"

#include <fmt/format.h>

#include "harness/atomic_file.hpp"

namespace logprobs {
namespace fs = std::filesystem;

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  // Not both there yet: the same name, after making both absolute and dropping "." and "..".
  return fs::absolute(a, ec).lexically_normal() == fs::absolute(b, ec).lexically_normal();
}

void write_output_file(const fs::path& path, std::string_view text, std::span<const std::string> inputs) {
  for (const std::string& input : inputs)
    if (!input.empty() && same_file(path, input))
      throw OutputFileError(fmt::format("refusing to write a report over {}, an input of this run", input));
  // AtomicFile: an unnamed temporary (O_TMPFILE) where the file system allows it, else an exclusive
  // one under a random, tagged name (a link or a FIFO placed there is never opened), removed on
  // failure, on SIGINT or SIGTERM, and after SIGKILL by the next writer in the folder.
  try {
    write_file_atomically(path, text);
  } catch (const FileError& e) {
    throw OutputFileError(e.what());
  }
}

}  // namespace logprobs
