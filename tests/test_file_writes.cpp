// Files the harness writes (write_safetensors, and through it every batch and result file):
// whole or not at all, never through a link or a FIFO someone placed beside the target, and no
// temporary left behind by a failure, by SIGTERM in the middle of a long write, or (after the
// next write in the folder) by SIGKILL: both through an unnamed file (O_TMPFILE, where the test
// folder's file system has it) and through the named fallback (LOGPROBS_ATOMIC_FILE_NAMED=1).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>

#include "harness/atomic_file.hpp"
#include "harness/batch_file.hpp"
#include "harness/writer_tag.hpp"
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

// A child writes a file of 1 GiB (of never-touched zero pages, so it costs no memory) through the
// named path (an unnamed file has no name to leave, nor to watch appear); the parent sends
// SIGTERM as soon as the temporary appears. The child must die of the signal, as it would have
// without the cleanup, and leave no file, whole or partial.
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
    ::setenv("LOGPROBS_ATOMIC_FILE_NAMED", "1", 1);
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

// Whether `folder`'s file system takes unnamed files.
bool has_o_tmpfile(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// A child that starts writing `out` through AtomicFile (named or unnamed), writes part of it,
// says so through a pipe and waits, mid-write, to be killed; the parent kills it with SIGKILL,
// which no handler sees. Returns the child's wait status.
int killed_mid_write(const fs::path& out, bool named) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    if (named) ::setenv("LOGPROBS_ATOMIC_FILE_NAMED", "1", 1);
    AtomicFile file(out);
    file.write(std::string(1 << 20, 'x'));
    if (::write(ready[1], "w", 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  const bool wrote = ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  return wrote ? status : -1;
}

std::set<std::string> temporaries_in(const fs::path& folder) {
  std::set<std::string> names;
  for (const std::string& name : names_in(folder))
    if (name.ends_with(".tmp")) names.insert(name);
  return names;
}

// Issue 24's finding 7: a writer killed by SIGKILL mid-write left ".out.st.<hex>.tmp" (as large
// as it had written) that no later run removed. The named fallback's temporary stays until the
// next write in that folder, which removes it since its writer is dead; an unnamed one never
// has a name to leave.
TEST(FileWrites, SigkillMidWriteLeavesNoTemporaryAfterTheNextWrite) {
  for (const bool named : {true, false}) {
    const fs::path folder = folder_for(named ? "sigkill_named" : "sigkill_unnamed");
    if (!named && !has_o_tmpfile(folder)) {
      GTEST_SKIP() << folder << ": its file system has no O_TMPFILE, so every write takes the named path";
    }
    const fs::path out = folder / "out.safetensors";
    std::ofstream(out) << "older";
    const int status = killed_mid_write(out, named);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    EXPECT_EQ(contents_of(out), "older") << "the killed write replaced the file";
    if (named) {
      EXPECT_EQ(temporaries_in(folder).size(), 1u) << "the killed writer's temporary";
    } else {
      EXPECT_EQ(temporaries_in(folder), std::set<std::string>{}) << "an unnamed write left a name";
    }
    // The next run writing in that folder (another file, named or not) removes what the dead left.
    write_result_file(folder / "next.safetensors", small_result());
    EXPECT_EQ(names_in(folder), (std::set<std::string>{"out.safetensors", "next.safetensors"}))
        << (named ? "named" : "unnamed") << ": left behind after the next write";
  }
}

// A writer that is alive keeps its temporary while others write beside it; once it is dead,
// the next write removes it. A tag whose pid runs a later process (another start time) is dead.
TEST(FileWrites, ALiveWritersTemporaryIsKeptAndAReusedPidsRemoved) {
  const fs::path folder = folder_for("live_writer");
  const std::optional<std::string> mine = writer_tag();
  if (!mine) GTEST_SKIP() << "no /proc to tag writers by";
  const std::string tag = *mine;
  ASSERT_EQ(tag_of_temporary(".out.safetensors." + tag + ".0123456789abcdef.tmp"), tag);
  EXPECT_EQ(tag_of_temporary(".out.safetensors.0123456789abcdef.tmp"), std::nullopt);  // untagged: never removed
  EXPECT_FALSE(writer_is_dead(tag));
  const std::string pid = tag.substr(0, tag.find('-'));
  const std::string rest = tag.substr(tag.find('-', pid.size() + 1));  // "-<pidns>-<boot>-<host>"
  const std::string reused = pid + "-1" + rest;                        // this pid, another start
  EXPECT_TRUE(writer_is_dead(reused));
  std::ofstream(folder / (".a." + tag + ".0123456789abcdef.tmp")) << "live";
  std::ofstream(folder / (".b." + reused + ".0123456789abcdef.tmp")) << "dead";
  std::ofstream(folder / ".c.0123456789abcdef.tmp") << "untagged";
  fs::create_symlink(folder / "c.txt", folder / (".d." + reused + ".0123456789abcdef.tmp"));  // not a regular file
  write_file_atomically(folder / "e.txt", "e");
  EXPECT_EQ(names_in(folder), (std::set<std::string>{".a." + tag + ".0123456789abcdef.tmp", ".c.0123456789abcdef.tmp",
                                                     ".d." + reused + ".0123456789abcdef.tmp", "e.txt"}));
}

}  // namespace
}  // namespace logprobs
