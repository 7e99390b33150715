// A run dir's one line of history (see history.hpp).
#include "train/checkpoint/history.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "ckpt/index.hpp"
#include "core/atomic_file.hpp"
#include "core/json.hpp"
#include "train/checkpoint/checkpoint.hpp"

namespace fs = std::filesystem;

namespace dtrain {

namespace {

const char* kPending = "abandoned/pending.json";

// The step recorded by a pending move aside (-1: none). A record that cannot be read was cut short
// while being written, before anything moved: it is ignored.
int64_t pending_step(const std::string& run_dir) {
  const std::string path = run_dir + "/" + kPending;
  std::error_code ec;
  if (!fs::exists(path, ec)) return -1;
  try {
    return json_get<int64_t>(parse_json(read_file(path, kMaxSmallFileBytes), path), "after_step", path);
  } catch (const ResourceExhausted&) {
    throw;  // this process's limit, not a sign about the files
  } catch (const Error&) {
    return -1;
  }
}

// The step a weights folder (model_best, model_final) was saved at; -1 when it cannot be told (a
// damaged or foreign folder, which is then moved aside with the rest: nothing is deleted).
int64_t saved_step(const std::string& dir) {
  try {
    const CheckpointIndex idx = CheckpointIndex::read(dir);
    return idx.meta.contains("step") ? json_get<int64_t>(idx.meta, "step", dir) : -1;
  } catch (const ResourceExhausted&) {
    throw;  // this process's limit, not a sign about the files
  } catch (const Error&) {
    return -1;
  }
}

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

int64_t checkpoint_step_of(const std::string& dir) {
  const std::string name = fs::path(dir).filename().string();
  if (name.size() <= 5 || name.rfind("step_", 0) != 0 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos || name.size() > 5 + 18)
    return -1;
  return std::atoll(name.c_str() + 5);
}

std::vector<std::string> checkpoints_of_line(const std::string& run_dir) {
  const int64_t pending = pending_step(run_dir);  // read before listing: see set_aside_after
  std::vector<std::string> out = checkpoints_newest_first(run_dir);
  if (pending >= 0) std::erase_if(out, [&](const std::string& ck) { return checkpoint_step_of(ck) > pending; });
  return out;
}

std::string SetAside::describe() const {
  std::vector<std::string> steps, rest;
  for (const std::string& m : moved)
    (m.rfind("checkpoints/", 0) == 0 ? steps : rest).push_back(fs::path(m).filename().string());
  std::sort(steps.begin(), steps.end());
  std::string out;
  if (!steps.empty())
    out = steps.size() == 1 ? "checkpoints " + steps[0]
                            : "checkpoints " + steps.front() + ".." + steps.back() + " (" + std::to_string(steps.size()) + ")";
  for (const std::string& r : rest) out += (out.empty() ? "" : ", ") + r;
  return out;
}

SetAside set_aside_after(const std::string& run_dir, int64_t step) {
  const fs::path root(run_dir);
  std::vector<std::string> later;  // relative to the run dir
  for (const std::string& ck : checkpoints_newest_first(run_dir))
    if (checkpoint_step_of(ck) > step) later.push_back("checkpoints/" + fs::path(ck).filename().string());
  std::error_code ec;
  for (const char* weights : {"model_best", "model_final"}) {
    if (!fs::is_directory(root / weights, ec)) continue;
    const int64_t saved = saved_step((root / weights).string());
    if (saved < 0 || saved > step) later.push_back(weights);
  }
  SetAside out;
  if (later.empty()) {
    fs::remove(root / kPending, ec);  // a finished move whose record outlived a kill
    return out;
  }
  if (std::find(later.begin(), later.end(), "model_final") != later.end() && fs::exists(root / "summary.json", ec))
    later.push_back("summary.json");
  // The folder, recorded before anything moves: a start after a kill in the middle reads the record
  // (checkpoints_of_line) and finishes the move under the same name.
  std::string folder;
  const std::string pending = (root / kPending).string();
  try {
    const Json rec = parse_json(read_file(pending, kMaxSmallFileBytes), pending);
    if (json_get<int64_t>(rec, "after_step", pending) == step) folder = json_get<std::string>(rec, "folder", pending);
  } catch (const ResourceExhausted&) {
    throw;  // this process's limit, not a sign about the files
  } catch (const Error&) {
  }
  if (folder.empty()) {
    folder = "abandoned/after_step_" + std::to_string(step) + "." + utc_stamp();
    if (fs::exists(root / folder, ec)) folder += "." + std::to_string(::getpid());
    fs::create_directories(root / "abandoned");
    write_file_atomic(pending, Json{{"after_step", step}, {"folder", folder}}.dump() + "\n");
  }
  const fs::path dest = root / folder;
  fs::create_directories(dest / "checkpoints");
  // The logs as they stood (the resumed run cuts them back to its checkpoint); copied again after
  // a kill, which changes nothing.
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name == "metrics.jsonl" || name.rfind("events.out.tfevents.", 0) == 0)
      fs::copy_file(e.path(), dest / name, fs::copy_options::overwrite_existing);
  }
  for (const std::string& rel : later) fs::rename(root / rel, dest / rel);
  fsync_dir((root / "checkpoints").string());
  fsync_dir(dest.string());
  fs::remove(pending);
  fsync_dir((root / "abandoned").string());
  out.folder = (root / folder).string();
  out.moved = later;
  return out;
}

}  // namespace dtrain
