// The K a file command judges at, and a result's shape held to it.
#include "file_k.hpp"

#include <fmt/format.h>

namespace logprobs::cli {

std::uint32_t k_for(const FileArgs& args, const BatchFile& file, const ResultFile* result) {
  if (const std::optional<std::uint32_t> k = args.k.chosen()) return *k;
  if (file.k) return *file.k;
  if (result != nullptr) {
    if (result->k) return *result->k;
    const std::optional<std::uint64_t> k = result->shape_k();
    if (k && *k <= kMaxK) return static_cast<std::uint32_t>(*k);
  }
  throw UsageError(
      fmt::format("neither --k nor --levels given, and {} has no \"k\" or \"levels\" in its metadata", args.input));
}

// A result of another K is the user's mistake, not the kernel's.
void check_result_k(const FileArgs& args, const ResultFile& got, std::uint32_t k) {
  const std::optional<std::uint64_t> implied = got.shape_k();
  if (!implied || *implied == k) return;  // no K at all (a packed width of 0): the judge's shape rule says so
  throw UsageError(fmt::format("{}: {}: K = {}, {}", args.result, got.shape_text(), *implied,
                               args.k.levels ? fmt::format("--levels {} given (K = {})", *args.k.levels, k)
                               : args.k.k    ? fmt::format("--k {} given", k)
                                             : fmt::format("K = {} from the batch file", k)));
}

}  // namespace logprobs::cli
