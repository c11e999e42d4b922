#include "output_paths.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "commands.hpp"
#include "output_file.hpp"

namespace logprobs::cli {
namespace {

namespace fs = std::filesystem;

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return S_ISREG(mode) ? "a file" : "a special file";
}

// The effective user's permission, as the kernel will judge the write (a read-only mount
// refuses even root).
bool writable_folder(const fs::path& folder) {
  return ::faccessat(AT_FDCWD, folder.c_str(), W_OK | X_OK, AT_EACCESS) == 0;
}

void check_folder_of(const NamedPath& output) {
  const fs::path path(output.path);
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    const int error = errno;
    throw UsageError(fmt::format("{} {}: cannot create it: folder {}: {}", output.option, output.path, folder.string(),
                                 std::strerror(error)));
  }
  if (!S_ISDIR(st.st_mode))
    throw UsageError(fmt::format("{} {}: cannot create it: {} is {}, not a folder", output.option, output.path,
                                 folder.string(), kind_of(st.st_mode)));
  if (!writable_folder(folder)) {
    const int error = errno;
    throw UsageError(fmt::format("{} {}: cannot create it: folder {} is not writable ({})", output.option, output.path,
                                 folder.string(), std::strerror(error)));
  }
}

}  // namespace

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& output = outputs[i];
    if (output.path.empty()) continue;
    // Written one after the other, the second would replace the first without a word.
    for (std::size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same_file(outputs[j].path, output.path))
        throw UsageError(fmt::format("{} {}: the path of {} too; give each output its own file", output.option,
                                     output.path, outputs[j].option));
    struct stat out {};
    if (::stat(output.path.c_str(), &out) == 0) {  // follows links: a link to an input is that input
      for (const NamedPath& input : inputs) {
        struct stat in {};
        if (!input.path.empty() && ::stat(input.path.c_str(), &in) == 0 && in.st_dev == out.st_dev &&
            in.st_ino == out.st_ino)
          throw UsageError(fmt::format("{} {}: refusing to write {} over {}, an input of this run ({})", output.option,
                                       output.path, output.holds, input.path, input.option));
      }
      if (!S_ISREG(out.st_mode))
        throw UsageError(fmt::format("{} {} is {}; give the path of a regular file", output.option, output.path,
                                     kind_of(out.st_mode)));
    }
    check_folder_of(output);
  }
}

void check_output_folder(const NamedPath& folder) {
  fs::path existing(folder.path.empty() ? "." : folder.path);
  struct stat st {};
  while (::stat(existing.c_str(), &st) != 0) {
    const int error = errno;
    fs::path parent = existing.parent_path();
    if (parent.empty()) parent = ".";
    if (error != ENOENT || parent == existing)
      throw UsageError(fmt::format("{} {}: cannot create it: {} ({})", folder.option, folder.path, existing.string(),
                                   std::strerror(error)));
    existing = parent;
  }
  if (!S_ISDIR(st.st_mode))
    throw UsageError(fmt::format("{} {}: {} is {}, not a folder", folder.option, folder.path, existing.string(),
                                 kind_of(st.st_mode)));
  if (!writable_folder(existing)) {
    const int error = errno;
    throw UsageError(fmt::format("{} {}: folder {} is not writable ({})", folder.option, folder.path, existing.string(),
                                 std::strerror(error)));
  }
}

}  // namespace logprobs::cli
