// Report files (--json, --junit) written so that a reader never sees half of one and a run
// never destroys what it read: the text goes through AtomicFile (a temporary file in the same
// folder, unnamed where it can be, then a rename); a path that names one of the run's inputs is refused before anything is
// written.
#pragma once

#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace logprobs {

class OutputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether two paths name one file: the same file by any name (a link) when both exist, else the
// same path once made absolute and normal.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// Throws OutputFileError when `path` is one of `inputs` (the same file by any name), or when it
// cannot be written; then no file is left behind, and an older file at `path` is untouched.
void write_output_file(const std::filesystem::path& path, std::string_view text,
                       std::span<const std::string> inputs = {});

}  // namespace logprobs
