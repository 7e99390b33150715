// Files the user names, checked before anything reads them: a regular file (never a folder, a named
// pipe that would block forever, or a device such as /dev/zero that never ends), and whole-file reads
// bounded by what that file can sensibly hold.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain {

// The most read_file takes by default: larger than any index, config or vocabulary dtrain writes.
inline constexpr size_t kMaxWholeFileBytes = size_t(1) << 30;
// The most a JSON or TOML file that a person or dtrain writes (config, summary, meta) can hold.
inline constexpr size_t kMaxSmallFileBytes = size_t(64) << 20;

// "a folder", "a named pipe (FIFO)", "a device", "a socket": what a path that is not a regular file
// is (following symbolic links); "" for a regular file or a path that is not there.
std::string non_regular_kind(const std::string& path);

// Throws "cannot read <what> PATH: it is a named pipe (FIFO), not a file; give the path of a regular
// file" unless PATH (after symbolic links) is a regular file or is absent (the caller's own "not
// found" then names what to do).
void require_regular_file(const std::string& path, std::string_view what = "file");

// Opens PATH for reading without ever blocking (a pipe is refused, not waited on) and checks that it
// is a regular file; errors name the file and the fix. The caller closes the descriptor.
int open_regular_file(const std::string& path, std::string_view what = "file");

// Whole file as bytes, at most max_bytes ("it holds N bytes, more than a <what> can hold"). Errors
// "cannot read X: no such file; check the path" (and alike for permissions, folders, pipes, devices).
std::string read_file(const std::string& path, size_t max_bytes = kMaxWholeFileBytes, std::string_view what = "file");

}  // namespace dtrain
