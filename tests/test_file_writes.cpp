// Files the harness writes (write_safetensors, and through it every batch and result file):
// whole or not at all, never through a link or a FIFO someone placed beside the target, and no
// temporary left behind by a failure or by SIGTERM in the middle of a long write.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "harness/batch_file.hpp"
#include "temp_dir.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, so that its listing shows what the test left.
fs::path folder_for(const std::string& test) {
  const fs::path folder = testing_support::temp_dir() / test;
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

std::set<std::string> names_in(const fs::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename().string());
  return names;
}

std::string contents_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ResultData small_result() {
  ResultData result(2, 2);
  result.lp_logits = {-0.5f, -1.5f, -0.25f, -2.f};
  result.lp_tokens = {1, 0, 0, 1};
  return result;
}

// The name the writer used for its temporary before: a link placed there made it write the
// victim, and it opened a FIFO there and waited for a reader for ever.
fs::path old_temporary_name(const fs::path& path) {
  return path.parent_path() / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()));
}

TEST(FileWrites, ALinkAtThePredictableTemporaryNameIsNeverFollowed) {
  const fs::path folder = folder_for("link_at_temporary");
  const fs::path victim = folder / "victim.txt", out = folder / "out.safetensors";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, old_temporary_name(out));
  write_result_file(out, small_result());
  EXPECT_EQ(contents_of(victim), "precious");
  EXPECT_TRUE(same_bits(read_result_file(out).packed, small_result()));
  EXPECT_EQ(names_in(folder),
            (std::set<std::string>{"victim.txt", "out.safetensors", old_temporary_name(out).filename()}));
}

TEST(FileWrites, AFifoAtThePredictableTemporaryNameDoesNotHang) {
  const fs::path folder = folder_for("fifo_at_temporary");
  const fs::path out = folder / "out.safetensors";
  // In a child with an alarm, so that a writer that opens the FIFO fails this test, not hangs it;
  // the child places the FIFO, the name holding its process id.
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(20);
    if (::mkfifo(old_temporary_name(out).c_str(), 0600) != 0) ::_exit(3);
    write_result_file(out, small_result());
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(same_bits(read_result_file(out).packed, small_result()));
}

TEST(FileWrites, AFifoOrAFolderAtTheTargetIsRefusedAndKept) {
  const fs::path folder = folder_for("fifo_at_target");
  const fs::path fifo = folder / "fifo.safetensors", dir = folder / "dir.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(dir);
  for (const fs::path& target : {fifo, dir}) {
    try {
      write_result_file(target, small_result());
      ADD_FAILURE() << target << " was replaced";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_EQ(names_in(folder), (std::set<std::string>{"fifo.safetensors", "dir.safetensors"})) << "a temporary left";
}

TEST(FileWrites, ALinkAtTheTargetIsReplacedNotWrittenThrough) {
  const fs::path folder = folder_for("link_at_target");
  const fs::path victim = folder / "victim.txt", out = folder / "out.safetensors";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, out);
  write_result_file(out, small_result());
  EXPECT_EQ(contents_of(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_TRUE(same_bits(read_result_file(out).packed, small_result()));
}

TEST(FileWrites, EveryWriteLeavesOnlyItsFile) {
  const fs::path folder = folder_for("only_its_file");
  for (int i = 0; i < 3; ++i) write_result_file(folder / "out.safetensors", small_result());
  EXPECT_EQ(names_in(folder), (std::set<std::string>{"out.safetensors"}));
  EXPECT_THROW(write_result_file(folder / "no" / "such" / "folder.safetensors", small_result()), FileError);
}

// A child writes a file of 1 GiB (of never-touched zero pages, so it costs no memory); the
// parent sends SIGTERM as soon as the temporary appears. The child must die of the signal, as it
// would have without the cleanup, and leave no file, whole or partial.
TEST(FileWrites, SigtermDuringALongWriteLeavesNoTemporary) {
  const fs::path folder = folder_for("sigterm");
  const int events = ::inotify_init1(IN_CLOEXEC);
  ASSERT_GE(events, 0);
  ASSERT_GE(::inotify_add_watch(events, folder.c_str(), IN_CREATE), 0);
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  void* zeros = ::mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(zeros, MAP_FAILED);
  const pid_t child = ::fork();
  if (child == 0) {
    const std::vector<SafetensorsTensor> tensors = {
        {"lp_logits", "F32", {kBytes / 4}, {static_cast<const std::byte*>(zeros), kBytes}}};
    write_safetensors(folder / "big.safetensors", tensors, {});
    ::_exit(0);
  }
  struct pollfd wait_for_creation = {events, POLLIN, 0};
  EXPECT_EQ(::poll(&wait_for_creation, 1, 30'000), 1) << "no temporary appeared";
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(events);
  ::munmap(zeros, kBytes);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  EXPECT_EQ(names_in(folder), std::set<std::string>{}) << "left behind after SIGTERM";
}

}  // namespace
}  // namespace logprobs
