// The subcommands of logprobs-check, each given its parsed and checked arguments; each returns
// the exit status (SPEC-facing verdicts: kAgree, kDisagree) or throws (UsageError, FileError,
// InvalidBatch: exit kBadInput).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "campaign.hpp"

namespace logprobs::cli {

inline constexpr int kAgree = 0;
inline constexpr int kDisagree = 1;
inline constexpr int kBadInput = 2;

// Bad usage found after parsing (an unknown backend, K missing): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// K given as --k K or --levels L (K = 2^L - 1): one or the other.
struct KArgs {
  std::optional<std::uint32_t> k;
  std::optional<int> levels;
  std::optional<std::uint32_t> chosen() const;
};

struct CampaignArgs {
  std::optional<double> time_s;       // none: 60 s, or no limit for a shard (its --cases bound it)
  std::uint64_t cases = 0;            // 0: no cap
  std::optional<std::uint64_t> seed;  // none: a fresh one, printed
  std::vector<std::uint32_t> ks;      // --k; none given: --levels, else kCampaignKs
  std::vector<int> levels;
  std::vector<std::string> backends;  // none: every available one but the reference
  std::string json;
  std::string junit;
  std::string out_dir = ".";
  std::string shard;                         // "I/N" or "auto"; empty: the whole campaign
  std::optional<std::uint32_t> shard_count;  // --shard-count, for --shard auto
  Tolerance tolerance;
  std::string program = "logprobs-check";
};

struct MergeArgs {
  std::vector<std::string> files;  // campaign reports (--json) of the shards
  std::string json;
  std::string junit;
  std::uint64_t memory_budget = 0;  // bytes the reports may make merge allocate
};

struct FileArgs {
  std::string input;
  std::string result;
  std::string output;
  std::string backend;
  KArgs k;
  bool ranks = false;  // run, compare: ask for lp_ranks
  std::vector<std::string> backends;
  std::string json;
  std::string junit;
  std::uint64_t max_violations = 20;  // kept (and listed) per verdict; every one is counted
  Tolerance tolerance;
  std::string program = "logprobs-check";  // how replay lines name this tool
  std::uint64_t memory_budget = 0;         // bytes the files may make the command allocate
};

int campaign_command(const CampaignArgs& args);
int run_command(const FileArgs& args);
int verify_command(const FileArgs& args);
int compare_command(const FileArgs& args);
int merge_command(const MergeArgs& args);
int backends_command();
// Every term of SPEC §5's tolerance on output row `output_row` of the batch file args.input.
int tolerance_command(const FileArgs& args, std::uint64_t output_row);

}  // namespace logprobs::cli
