// Staging a prepared data folder to fast node-local storage (/dev/shm, a local disk) before training:
// one copier per node (a file lock), the other local processes wait and reuse its copy; room checked
// first; every file's CRC-32C compared after the copy; the copy made whole or not at all.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

struct StageResult {
  std::string dir;       // the staged copy: TARGET/<name of the data folder>
  bool copied = false;   // false: an earlier copy of the same files was reused
  int64_t bytes = 0;     // the folder's size
  int64_t files = 0;
  double seconds = 0;
};

// Copies the regular files of `data_dir` (recursively, hidden files and a word-level folder's text/
// left out) into `target`/<data_dir's name>, unless a complete copy of the same files (names, sizes,
// modification times) is there already. Error naming the target, the room it has and the room it
// needs when the copy does not fit; naming a file whose copy's checksum differs.
StageResult stage_data(const std::string& data_dir, const std::string& target);

}  // namespace dtrain
