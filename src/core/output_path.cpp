// Output paths checked before anything is written (see output_path.hpp).
#include "core/output_path.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

// A dtrain checkpoint: its index.json starts with the checkpoint format (a web project's index.json
// does not make its folder one).
bool is_checkpoint(const fs::path& dir) {
  const fs::path index = dir / "index.json";
  if (!present(index)) return false;
  try {
    const int fd = open_regular_file(index.string());
    char head[256] = {};
    const ssize_t n = ::pread(fd, head, sizeof head - 1, 0);
    ::close(fd);
    return n > 0 && std::string(head, size_t(n)).find("\"dtrain-checkpoint") != std::string::npos;
  } catch (const Error&) {
    return false;
  }
}


bool is_run_dir(const fs::path& dir) { return present(dir / "run.lock"); }

// "a training job holds it (pid 12 on host h since …)" while a job holds run.lock, else "".
std::string lock_holder(const fs::path& run_dir) {
  const std::string path = (run_dir / "run.lock").string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string who;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    char buf[256] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    who = n > 0 ? std::string(buf, size_t(n)) : "another process";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    who = " that a training job holds (" + who + ")";
  }
  ::close(fd);
  return who;
}

// The first entry of DIR (recursively) that no pattern matches, "" if none.
std::string stranger_in(const fs::path& dir, const std::vector<std::string>& patterns) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(dir).string();
    bool known = fnmatch("*.tmp.*", it->path().filename().c_str(), 0) == 0;
    for (const std::string& p : patterns) known = known || fnmatch(p.c_str(), rel.c_str(), 0) == 0;
    if (!known) return rel;
  }
  return ec ? std::string("(unlistable: ") + ec.message() + ")" : "";
}

bool empty_folder(const fs::path& dir) {
  std::error_code ec;
  return fs::directory_iterator(dir, ec) == fs::directory_iterator();
}

}  // namespace

MadeBy holds_only(std::vector<std::string> patterns) {
  return [patterns = std::move(patterns)](const std::string& dir) { return stranger_in(dir, patterns).empty(); };
}

std::string enclosing_checkpoint_or_run(const std::string& path, std::string* what) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  for (; !p.empty(); p = p.parent_path()) {
    if (is_checkpoint(p)) {
      *what = "checkpoint";
      return p.string();
    }
    if (is_run_dir(p)) {
      *what = "run dir";
      return p.string();
    }
    if (p == p.root_path()) break;
  }
  return "";
}

void check_output_folder(const std::string& dir, const std::string& command, const MadeBy& made_by) {
  const std::string fix = ": choose another --out (a new or empty folder)";
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) throw Error("--out " + dir + " is a file, not a folder" + fix);
  std::string what;
  fs::path norm = fs::absolute(dir, ec).lexically_normal();
  if (!norm.has_filename()) norm = norm.parent_path();  // "imported/" names the folder itself
  const fs::path parent = norm.parent_path();
  if (const std::string around = enclosing_checkpoint_or_run(parent.string(), &what); !around.empty())
    throw Error("--out " + dir + " is inside the " + what + " " + around + ", whose files its writer keeps" + fix);
  if (!fs::exists(st) || empty_folder(dir)) return;
  if (is_run_dir(dir))
    throw Error("--out " + dir + " is a run dir" + lock_holder(dir) + "; " + command + " would replace it" + fix);
  if (made_by(dir)) return;
  const std::string stranger = stranger_in(dir, {});
  throw Error("--out " + dir + " holds what " + command + " did not make (e.g. " + stranger +
              (is_checkpoint(dir) ? ", a checkpoint's" : "") + ") and would be replaced" + fix +
              ", or move that folder away yourself");
}

void check_output_file(const std::string& file, const std::string& option,
                       const std::vector<std::string>& allowed_in_run_dir) {
  std::string what;
  const std::string around = enclosing_checkpoint_or_run(file, &what);
  if (around.empty()) return;
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(file, ec), ec);
  const bool top = abs.parent_path() == fs::path(around);
  for (const std::string& name : allowed_in_run_dir)
    if (what == "run dir" && top && abs.filename() == name) return;
  throw Error(option + " " + file + " is inside the " + what + " " + around +
              ", whose files its writer keeps (and checks): write it outside, e.g. beside that folder");
}

}  // namespace dtrain
