#include "shard.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdlib>
#include <vector>

namespace logprobs {
namespace {

// A shard count above this is a typo, not a cluster: 2^20 tasks of one campaign.
constexpr std::uint64_t kMaxShards = std::uint64_t{1} << 20;

std::optional<std::uint64_t> whole_number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// The variable `name` as a whole number, nullopt when unset or empty.
std::optional<std::uint64_t> number_from(const EnvLookup& env, const char* name) {
  const std::optional<std::string> text = env(name);
  if (!text || text->empty()) return std::nullopt;
  const std::optional<std::uint64_t> value = whole_number(*text);
  if (!value) throw ShardError(fmt::format("--shard auto: {} = '{}' is not a whole number", name, *text));
  return value;
}

Shard checked(std::uint64_t index, std::uint64_t count, std::string source) {
  if (count == 0 || count > kMaxShards)
    throw ShardError(fmt::format("{}: the shard count must be 1..{}, got {}", source, kMaxShards, count));
  if (index >= count)
    throw ShardError(fmt::format("{}: shard index {} is not below the shard count {}", source, index, count));
  return {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(count), std::move(source)};
}

std::optional<Shard> from_explicit_variables(const EnvLookup& env) {
  const std::optional<std::uint64_t> index = number_from(env, "LOGPROBS_SHARD_INDEX");
  if (!index) return std::nullopt;
  const std::optional<std::uint64_t> count = number_from(env, "LOGPROBS_SHARD_COUNT");
  if (!count)
    throw ShardError(
        fmt::format("--shard auto: LOGPROBS_SHARD_INDEX = {} but LOGPROBS_SHARD_COUNT is not set", *index));
  return checked(*index, *count, fmt::format("LOGPROBS_SHARD_INDEX={} LOGPROBS_SHARD_COUNT={}", *index, *count));
}

// Slurm numbers array tasks as written in --array (0-9, 1-10, or 1,3,5); a shard needs N
// consecutive ids, counted from the smallest.
std::optional<Shard> from_slurm(const EnvLookup& env) {
  const std::optional<std::uint64_t> id = number_from(env, "SLURM_ARRAY_TASK_ID");
  if (!id) return std::nullopt;
  const std::optional<std::uint64_t> count = number_from(env, "SLURM_ARRAY_TASK_COUNT");
  if (!count)
    throw ShardError(fmt::format("--shard auto: SLURM_ARRAY_TASK_ID = {} but SLURM_ARRAY_TASK_COUNT is not set", *id));
  const std::uint64_t min = number_from(env, "SLURM_ARRAY_TASK_MIN").value_or(0);
  const std::uint64_t max = number_from(env, "SLURM_ARRAY_TASK_MAX").value_or(min + *count - 1);
  const std::uint64_t step = number_from(env, "SLURM_ARRAY_TASK_STEP").value_or(1);
  if (step != 1 || max < min || max - min + 1 != *count || *id < min || *id > max)
    throw ShardError(
        fmt::format("--shard auto: the Slurm array is not {} consecutive task ids (SLURM_ARRAY_TASK_MIN..MAX = {}..{}, "
                    "STEP = {}, ID = {}); submit it as --array=0-{}, or give --shard I/N",
                    *count, min, max, step, *id, *count - 1));
  return checked(
      *id - min, *count,
      fmt::format("SLURM_ARRAY_TASK_ID={} SLURM_ARRAY_TASK_MIN={} SLURM_ARRAY_TASK_COUNT={}", *id, min, *count));
}

std::optional<Shard> from_kubernetes(const EnvLookup& env, std::optional<std::uint32_t> count_option) {
  const std::optional<std::uint64_t> index = number_from(env, "JOB_COMPLETION_INDEX");
  if (!index) return std::nullopt;
  // The Job does not put its completions in the environment: the count comes from the option or
  // from LOGPROBS_SHARD_COUNT, and where both are given they must agree (one silently winning
  // would run a shard of another split).
  const std::optional<std::uint64_t> from_variable = number_from(env, "LOGPROBS_SHARD_COUNT");
  if (count_option && from_variable && *count_option != *from_variable)
    throw ShardError(fmt::format("--shard auto: --shard-count {} disagrees with LOGPROBS_SHARD_COUNT = {} (beside "
                                 "JOB_COMPLETION_INDEX = {}); give one count",
                                 *count_option, *from_variable, *index));
  std::optional<std::uint64_t> count = count_option;
  std::string count_source = "--shard-count";
  if (!count) {
    count = from_variable;
    count_source = "LOGPROBS_SHARD_COUNT";
  }
  if (!count)
    throw ShardError(
        fmt::format("--shard auto: JOB_COMPLETION_INDEX = {} (a Kubernetes Indexed Job) but no shard count: give "
                    "--shard-count N or set LOGPROBS_SHARD_COUNT to the Job's spec.completions",
                    *index));
  return checked(*index, *count, fmt::format("JOB_COMPLETION_INDEX={} {}={}", *index, count_source, *count));
}

// GitLab numbers parallel jobs from 1.
std::optional<Shard> from_gitlab(const EnvLookup& env) {
  const std::optional<std::uint64_t> node = number_from(env, "CI_NODE_INDEX");
  if (!node) return std::nullopt;
  const std::optional<std::uint64_t> total = number_from(env, "CI_NODE_TOTAL");
  if (!total) throw ShardError(fmt::format("--shard auto: CI_NODE_INDEX = {} but CI_NODE_TOTAL is not set", *node));
  if (*node == 0) throw ShardError("--shard auto: CI_NODE_INDEX = 0, but GitLab numbers parallel jobs from 1");
  return checked(*node - 1, *total, fmt::format("CI_NODE_INDEX={} CI_NODE_TOTAL={}", *node, *total));
}

Shard from_environment(std::optional<std::uint32_t> count_option, const EnvLookup& env) {
  std::vector<Shard> found;
  for (std::optional<Shard> shard :
       {from_explicit_variables(env), from_slurm(env), from_kubernetes(env, count_option), from_gitlab(env)})
    if (shard) found.push_back(std::move(*shard));
  if (found.empty())
    throw ShardError(
        "--shard auto found no shard in the environment: it reads LOGPROBS_SHARD_INDEX and LOGPROBS_SHARD_COUNT, "
        "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, JOB_COMPLETION_INDEX (with --shard-count N), or "
        "CI_NODE_INDEX and CI_NODE_TOTAL; or give --shard I/N");
  for (const Shard& other : found)
    if (other.index != found.front().index || other.count != found.front().count) {
      std::vector<std::string> sources;
      for (const Shard& s : found) sources.push_back(fmt::format("{} ({}/{})", s.source, s.index, s.count));
      throw ShardError(
          fmt::format("--shard auto: the environment names different shards: {}; unset all but one, "
                      "or give --shard I/N",
                      fmt::join(sources, " but ")));
    }
  // --shard-count with an engine that gives its own count: they must agree.
  if (count_option && *count_option != found.front().count)
    throw ShardError(fmt::format("--shard-count {} disagrees with {} (count {})", *count_option, found.front().source,
                                 found.front().count));
  return found.front();
}

}  // namespace

EnvLookup process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  };
}

Shard parse_shard(std::string_view spec, std::optional<std::uint32_t> count, const EnvLookup& env) {
  if (spec == "auto") return from_environment(count, env);
  if (count) throw ShardError("--shard-count is for --shard auto (with --shard I/N the count is N)");
  const std::size_t slash = spec.find('/');
  const std::optional<std::uint64_t> index =
      slash == std::string_view::npos ? std::nullopt : whole_number(spec.substr(0, slash));
  const std::optional<std::uint64_t> total =
      slash == std::string_view::npos ? std::nullopt : whole_number(spec.substr(slash + 1));
  if (!index || !total)
    throw ShardError(fmt::format("--shard must be I/N (0 <= I < N, e.g. 0/4) or auto, got '{}'", spec));
  return checked(*index, *total, "--shard " + std::string(spec));
}

}  // namespace logprobs
