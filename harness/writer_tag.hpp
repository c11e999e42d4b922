// Names for temporaries that say who writes them, so that one left by a writer that died without
// cleaning up (kill -9, an OOM kill, a CI hard timeout, a power cut) is removed by the next writer
// in its folder, and one whose writer still runs is left alone.
//
// The tag is "<pid>-<start>-<pidns>-<boot>": the process id; its start time in clock ticks since
// boot (/proc/PID/stat field 22), which tells a reused pid apart; its pid namespace's inode
// (/proc/self/ns/pid), since a pid means another process in another namespace (a container
// writing to a shared volume); and the boot id (/proc/sys/kernel/random/boot_id), since after a
// reboot no writer of the last boot runs. A temporary is stale only when all of that says its
// writer is gone: another boot, or the same boot and namespace with no process of that pid and
// start time. Anything unknown (no /proc, another namespace, an unreadable process) is alive.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace logprobs {

// This process's tag, or nothing when /proc cannot say who we are (then temporaries are named
// without one, and never judged stale).
std::optional<std::string> writer_tag();

// The tag in a temporary's name made as ".<stem>.<tag>.<16 hex>.tmp", or nothing for any other
// name.
std::optional<std::string_view> tag_of_temporary(std::string_view name);

// Whether the writer of `tag` is known to be gone (see above).
bool writer_is_dead(std::string_view tag);

// Removes from `folder` each regular file of this user named as a tagged temporary whose writer
// is dead; never follows a link, never removes anything else. Errors are ignored: a temporary
// that cannot be removed is left for the next writer.
void remove_stale_temporaries(const std::filesystem::path& folder);

}  // namespace logprobs
