#include "output_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

namespace logprobs {
namespace fs = std::filesystem;
namespace {

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  // Not both there yet: the same name, after making both absolute and dropping "." and "..".
  return fs::absolute(a, ec).lexically_normal() == fs::absolute(b, ec).lexically_normal();
}

}  // namespace

void write_output_file(const fs::path& path, std::string_view text, std::span<const std::string> inputs) {
  for (const std::string& input : inputs)
    if (!input.empty() && same_file(path, input))
      throw OutputFileError(fmt::format("refusing to write a report over {}, an input of this run", input));
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const fs::path temp = folder / fmt::format(".{}.tmp-{}", path.filename().string(), ::getpid());
  std::error_code ignored;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw OutputFileError(fmt::format("cannot create {} (to write {})", temp.string(), path.string()));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(temp, ignored);
      throw OutputFileError(fmt::format("writing {} failed", temp.string()));
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp, ignored);
    throw OutputFileError(fmt::format("cannot rename {} to {}: {}", temp.string(), path.string(), ec.message()));
  }
}

}  // namespace logprobs
