// logprobs-check and the paths it writes: an input is never overwritten (by name, link or hard
// link), a FIFO never hangs it, an output it could not write is found before any work, and a
// standard output it could not write makes the run fail.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "command_runner.hpp"
#include "harness/batch_file.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;

using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;
using testing_support::logprobs_check_with_stdout;
using testing_support::logprobs_check_within;
using testing_support::temp_dir;

// One batch item, V = 4, two output rows, K in the metadata.
BatchData small_batch() {
  BatchData b;
  b.vocab = b.row_stride = 4;
  b.rows = 2;
  b.logits = {0.5f, -1.f, 2.f, 1.5f, 3.f, 1.f, 2.f, 0.f};
  b.tokens = {2};
  b.sampled_tokens = {1};
  b.logit_row_offsets = {0, 2};
  b.token_row_offsets = {0, 1};
  b.lp_output_offsets = {0, 2};
  return b;
}

std::string contents_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A fresh folder with batch.safetensors (K = 3) and result.safetensors (max's result for it).
class CheckPaths : public testing::Test {
 protected:
  void SetUp() override {
    folder_ = temp_dir() / testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    write_batch_file(path("batch.safetensors"), small_batch(), 3);
    const CommandResult run = logprobs_check("run --backend max --input " + path("batch.safetensors") + " --output " +
                                             path("result.safetensors"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    batch_bytes_ = contents_of(path("batch.safetensors"));
    result_bytes_ = contents_of(path("result.safetensors"));
  }
  std::string path(const std::string& name) const { return (folder_ / name).string(); }

  // Exit 2 with `fragment`, both files as they were, and nothing else in the folder but `extra`.
  void expect_refused(const CommandResult& result, const std::string& fragment, std::set<std::string> extra = {}) {
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(contains(result.output, fragment)) << result.output;
    EXPECT_EQ(contents_of(path("batch.safetensors")), batch_bytes_) << "the input changed";
    EXPECT_EQ(contents_of(path("result.safetensors")), result_bytes_) << "the result file changed";
    extra.insert({"batch.safetensors", "result.safetensors"});
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder_)) names.insert(entry.path().filename().string());
    EXPECT_EQ(names, extra) << result.output;
  }

  fs::path folder_;
  std::string batch_bytes_, result_bytes_;
};

TEST_F(CheckPaths, RunOntoItsInputIsRefused) {
  const std::string batch = path("batch.safetensors");
  expect_refused(
      logprobs_check("run --backend max --input " + batch + " --output " + batch),
      "--output " + batch + ": refusing to write the result over " + batch + ", an input of this run (--input)");
  fs::create_hard_link(batch, path("hard.safetensors"));
  expect_refused(logprobs_check("run --backend max --input " + batch + " --output " + path("hard.safetensors")),
                 "refusing to write the result over " + batch, {"hard.safetensors"});
}

TEST_F(CheckPaths, JsonOntoAnInputIsRefusedAlsoThroughALink) {
  const std::string batch = path("batch.safetensors"), result = path("result.safetensors");
  expect_refused(logprobs_check("compare --backends max --input " + batch + " --json " + batch),
                 "--json " + batch + ": refusing to write a report over " + batch + ", an input of this run (--input)");
  fs::create_symlink(batch, path("link.json"));
  expect_refused(logprobs_check("compare --backends max --input " + batch + " --json " + path("link.json")),
                 "refusing to write a report over " + batch, {"link.json"});
  expect_refused(logprobs_check("verify --input " + batch + " --result " + result + " --json " + result),
                 "--json " + result + ": refusing to write a report over " + result, {"link.json"});
}

TEST_F(CheckPaths, AFifoAnywhereNeverHangs) {
  const std::string batch = path("batch.safetensors"), fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(logprobs_check_within(20, "compare --backends max --input " + batch + " --json " + fifo),
                 "--json " + fifo + " is a FIFO", {"fifo"});
  expect_refused(logprobs_check_within(20, "run --backend max --input " + batch + " --output " + fifo),
                 "--output " + fifo + " is a FIFO", {"fifo"});
  expect_refused(logprobs_check_within(20, "compare --backends max --input " + fifo), "not a regular file", {"fifo"});
  expect_refused(logprobs_check_within(20, "merge " + fifo), fifo + ": cannot read: not a regular file", {"fifo"});
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(CheckPaths, AnOutputFolderThatCannotTakeTheFileIsFoundBeforeAnyWork) {
  const std::string batch = path("batch.safetensors");
  std::ofstream(path("file")) << "a file, not a folder";
  const std::string under_file = path("file") + "/out";
  expect_refused(logprobs_check("campaign --backends max --levels 0 --time 0 --out-dir " + path("file")),
                 "--out-dir " + path("file") + ": " + path("file") + " is a file, not a folder", {"file"});
  expect_refused(logprobs_check("campaign --backends max --levels 0 --time 0 --out-dir " + under_file),
                 "--out-dir " + under_file, {"file"});
  expect_refused(logprobs_check("campaign --backends max --levels 0 --time 0 --json " + under_file + ".json"),
                 "--json " + under_file + ".json: cannot create it", {"file"});
  expect_refused(logprobs_check("compare --backends max --input " + batch + " --json " + under_file + ".json"),
                 "--json " + under_file + ".json: cannot create it", {"file"});
  expect_refused(logprobs_check("run --backend max --input " + batch + " --output " + path("no/such") + ".st"),
                 "--output " + path("no/such") + ".st: cannot create it", {"file"});
  const CommandResult campaign = logprobs_check("campaign --backends max --levels 0 --time 0 --out-dir " + under_file);
  EXPECT_FALSE(contains(campaign.output, "logprobs-check campaign:")) << "the campaign started: " << campaign.output;
}

// Root writes into any folder, so as root the command runs as nobody (setpriv, util-linux).
CommandResult logprobs_check_unprivileged(const std::string& args) {
  if (::geteuid() != 0) return logprobs_check(args);
  return testing_support::run_shell(std::string("setpriv --reuid=65534 --regid=65534 --clear-groups '") +
                                    LOGPROBS_CHECK_PATH + "' " + args + " 2>&1");
}

TEST_F(CheckPaths, AnUnwritableOutputFolderIsFoundBeforeAnyWork) {
  if (::geteuid() == 0 && ::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "root, and no setpriv";
  fs::create_directory(path("locked"));
  fs::permissions(path("locked"),
                  fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read | fs::perms::others_exec);
  expect_refused(logprobs_check_unprivileged("campaign --backends max --levels 0 --time 0 --out-dir " + path("locked")),
                 "--out-dir " + path("locked") + ": folder " + path("locked") + " is not writable", {"locked"});
  expect_refused(logprobs_check_unprivileged("compare --backends max --input " + path("batch.safetensors") +
                                             " --json " + path("locked") + "/x.json"),
                 "folder " + path("locked") + " is not writable", {"locked"});
  fs::permissions(path("locked"), fs::perms::owner_all);
}

TEST_F(CheckPaths, AStandardOutputThatCannotBeWrittenFailsTheRun) {
  const std::string batch = path("batch.safetensors");
  for (const std::string& args :
       {"compare --backends max --input " + batch,
        "verify --input " + batch + " --result " + path("result.safetensors"), std::string("backends")}) {
    const CommandResult full = logprobs_check_with_stdout(args, "/dev/full");
    EXPECT_EQ(full.exit_code, 2) << args << "\n" << full.output;
    EXPECT_TRUE(contains(full.output, "cannot write the standard output: No space left on device")) << args << "\n"
                                                                                                    << full.output;
  }
}

// The case: --json X --junit X exited 0, one report replacing the other.
TEST_F(CheckPaths, OnePathGivenForTwoOutputsIsRefused) {
  const std::string batch = path("batch.safetensors"), report = path("report");
  expect_refused(logprobs_check("compare --backends max --input " + batch + " --json " + report + " --junit " + report),
                 "--junit " + report + ": the path of --json too; give each output its own file");
  expect_refused(logprobs_check("verify --input " + batch + " --result " + path("result.safetensors") + " --json " +
                                report + " --junit " + path(".") + "/report"),
                 "the path of --json too");
  expect_refused(logprobs_check("campaign --backends max --levels 0 --time 0 --json " + report + " --junit " + report +
                                " --out-dir " + path("out")),
                 "the path of --json too");
  std::ofstream(report) << "an older report";
  fs::create_symlink(report, path("link"));
  expect_refused(logprobs_check("compare --backends max --input " + batch + " --json " + report + " --junit " +
                                path("link")),
                 "the path of --json too", {"report", "link"});
  EXPECT_EQ(contents_of(report), "an older report");
}

// The case: a reader that closed the pipe killed the tool by SIGPIPE (exit 141, nothing
// said). Now the write fails, and the run says so and exits 2.
TEST_F(CheckPaths, AStandardOutputWhoseReaderIsGoneFailsTheRunWithAMessage) {
  const std::string batch = path("batch.safetensors");
  for (const std::string& args : {"compare --backends max --input " + batch, std::string("backends"),
                                  std::string("campaign --backends max --levels 0 --time 0 --out-dir ") + path("out")}) {
    const CommandResult closed = testing_support::logprobs_check_into_closed_pipe(args);
    EXPECT_EQ(closed.exit_code, 2) << args << "\n" << closed.output;
    EXPECT_TRUE(contains(closed.output, "cannot write the standard output: Broken pipe")) << args << "\n"
                                                                                         << closed.output;
  }
}

}  // namespace
}  // namespace logprobs
