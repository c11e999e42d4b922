#include "writer_tag.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <fstream>
#include <sstream>
#include <vector>

namespace logprobs {
namespace {

struct Tag {
  std::string pid, start, pidns, boot, host;
};

bool all_of_class(std::string_view text, int (*is)(int)) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [is](char c) { return is(static_cast<unsigned char>(c)) != 0; });
}

std::optional<Tag> parse_tag(std::string_view tag) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in{std::string(tag)};
  while (std::getline(in, part, '-')) parts.push_back(part);
  if (parts.size() != 5 || !all_of_class(parts[0], isdigit) || !all_of_class(parts[1], isdigit) ||
      !all_of_class(parts[2], isdigit) || !all_of_class(parts[3], isxdigit) || !all_of_class(parts[4], isxdigit) ||
      parts[0].size() > 10 || parts[1].size() > 20 || parts[2].size() > 20 || parts[3].size() != 16 ||
      parts[4].size() != 16)
    return std::nullopt;
  return Tag{parts[0], parts[1], parts[2], parts[3], parts[4]};
}

// Field 22 of /proc/PID/stat, the process's start in clock ticks since boot; nothing when it
// cannot be read, with errno saying why (ENOENT: no such process).
std::optional<std::string> start_time_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  if (!in) return std::nullopt;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t name_end = stat.rfind(')');  // the command name may hold spaces and ')'
  if (name_end == std::string::npos) {
    errno = EIO;
    return std::nullopt;
  }
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> field)) {
      errno = EIO;
      return std::nullopt;
    }
  return field;
}

// The digits of "pid:[4026531836]".
std::optional<std::string> pid_namespace() {
  char link[64];
  const ssize_t n = ::readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n <= 0) return std::nullopt;
  std::string digits;
  for (const char c : std::string_view(link, std::size_t(n)))
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  if (digits.empty()) return std::nullopt;
  return digits;
}

// The first 16 hex digits of the boot id.
std::optional<std::string> boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id, hex;
  if (!(in >> id)) return std::nullopt;
  for (const char c : id)
    if (std::isxdigit(static_cast<unsigned char>(c)) && hex.size() < 16) hex += char(std::tolower(c));
  if (hex.size() != 16) return std::nullopt;
  return hex;
}

// 64-bit FNV-1a of the host name, in hex: a folder on a shared file system is written from
// several machines, whose pids and boots say nothing about each other.
std::string host_hash() {
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  std::uint64_t hash = 0xcbf29ce484222325u;
  for (const char* c = name; *c != '\0'; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 0x100000001b3u;
  return fmt::format("{:016x}", hash);
}

// Whether the writer of `text` is gone, judged by a writer whose own tag is `mine_text`.
bool dead_beside(std::string_view text, const std::string& mine_text) {
  const std::optional<Tag> tag = parse_tag(text);
  const std::optional<Tag> mine = parse_tag(mine_text);
  if (!tag || !mine) return false;
  if (tag->host != mine->host) return false;  // another machine's: nothing here says
  if (tag->boot != mine->boot) return true;   // this machine, an earlier boot
  if (tag->pidns != mine->pidns) return false;
  errno = 0;
  const std::optional<std::string> start = start_time_of(tag->pid);
  if (!start) return errno == ENOENT;  // no such process (EACCES and the like: unknown, alive)
  return *start != tag->start;         // the pid reused by a later process
}

}  // namespace

std::optional<std::string> writer_tag() {
  // Made afresh at each call (a few reads of /proc): a forked child is another writer.
  const std::string pid = std::to_string(::getpid());
  const auto start = start_time_of(pid);
  const auto pidns = pid_namespace();
  const auto boot = boot_id();
  if (!start || !pidns || !boot) return std::nullopt;
  return fmt::format("{}-{}-{}-{}-{}", pid, *start, *pidns, *boot, host_hash());
}

std::optional<std::string_view> tag_of_temporary(std::string_view name) {
  constexpr std::string_view kSuffix = ".tmp";
  if (!name.starts_with('.') || !name.ends_with(kSuffix)) return std::nullopt;
  name.remove_suffix(kSuffix.size());
  const std::size_t random_dot = name.rfind('.');
  if (random_dot == std::string_view::npos || name.size() - random_dot - 1 != 16 ||
      !all_of_class(name.substr(random_dot + 1), isxdigit))
    return std::nullopt;
  name = name.substr(0, random_dot);
  const std::size_t tag_dot = name.rfind('.');
  if (tag_dot == std::string_view::npos || tag_dot == 0) return std::nullopt;
  const std::string_view tag = name.substr(tag_dot + 1);
  if (!parse_tag(tag)) return std::nullopt;
  return tag;
}

bool writer_is_dead(std::string_view tag) {
  const std::optional<std::string> mine = writer_tag();
  return mine && dead_beside(tag, *mine);
}

void remove_stale_temporaries(const std::filesystem::path& folder) {
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) return;
  const int dir_fd = ::dirfd(dir);
  const std::optional<std::string> mine = writer_tag();
  while (const dirent* entry = ::readdir(dir)) {
    const std::optional<std::string_view> tag = tag_of_temporary(entry->d_name);
    if (!mine || !tag || *tag == *mine || !dead_beside(*tag, *mine)) continue;
    struct stat st {};
    if (::fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) ::unlinkat(dir_fd, entry->d_name, 0);
  }
  ::closedir(dir);
}

}  // namespace logprobs
