// Which share of a campaign one process runs: `--shard I/N`, or `--shard auto`, read from the
// variables a batch or CI engine sets for each task of an array (Slurm job arrays, Kubernetes
// Indexed Jobs, GitLab's `parallel:`) or that a CI matrix passes explicitly. The engine is the
// scheduler; the harness only has to take a deterministic, disjoint share from what it is told.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace logprobs {

struct Shard {
  std::uint32_t index = 0;  // 0 <= index < count
  std::uint32_t count = 1;
  std::string source;  // where index and count came from, for the log ("--shard", "SLURM_ARRAY_TASK_ID=3 ...")
  // Case `case_index` (hand or random) belongs to this shard.
  bool owns(std::uint64_t case_index) const { return case_index % count == index; }
  bool sharded() const { return count > 1; }
};

// A --shard that cannot be honoured: its message says what was read and what to give instead.
class ShardError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Looks a variable up: the process environment, or a table in tests.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_environment();

// `spec` is "I/N" (0 <= I < N) or "auto". For "auto" the index and count come from, in turn:
//   LOGPROBS_SHARD_INDEX, LOGPROBS_SHARD_COUNT     what a CI matrix passes explicitly
//   SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT   a Slurm job array
//   JOB_COMPLETION_INDEX, and `count` or LOGPROBS_SHARD_COUNT   a Kubernetes Indexed Job (which
//                                                  does not put its completions in the environment)
//   CI_NODE_INDEX - 1, CI_NODE_TOTAL               GitLab's `parallel: N`
// Every engine found must give the same shard; none found, a count missing, a value that is not
// a whole number, a Slurm array with gaps or a step, an index not below its count: ShardError.
// `count` (--shard-count) is only for "auto".
Shard parse_shard(std::string_view spec, std::optional<std::uint32_t> count, const EnvLookup& env);

}  // namespace logprobs
