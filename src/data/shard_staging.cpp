// Staging folders of a shard preparation: lock, cleanup, commit by rename (see shard_staging.hpp).
#include "data/shard_staging.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/shard_format.hpp"

namespace dtrain {

namespace fs = std::filesystem;

ShardStaging::ShardStaging(const std::string& out_dir) : dir_(strip_slashes(out_dir)) {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    require(!ec, "cannot create output folder " + dir_ + " (" + ec.message() + "): choose a writable --out");
    created_ = true;
  }
  lock_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  require(lock_fd_ >= 0, "cannot open output folder " + dir_ + " (" + std::strerror(errno) + "): choose another --out");
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw Error("another dtrain data prepare is writing " + dir_ + ": wait for it to end, or prepare into another "
                "folder");
  }
  for (int s = 0; s < 3; ++s) fs::remove_all(partial(s), ec);  // what a killed prepare left
}

ShardStaging::~ShardStaging() {
  std::error_code ec;
  if (!committed_) {
    for (int s = 0; s < 3; ++s) fs::remove_all(partial(s), ec);
    if (created_ && fs::is_empty(dir_, ec)) fs::remove(dir_, ec);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string ShardStaging::partial(int split) const {
  return (fs::path(dir_) / (std::string(kShardSplits[split]) + ".partial")).string();
}

void ShardStaging::commit(const std::vector<int>& written, const std::vector<int>& emptied,
                          const std::string& tokenizer_name, const std::string& tokenizer_bytes,
                          bool only_this_tokenizer) {
  write_file_atomic((fs::path(dir_) / tokenizer_name).string(), tokenizer_bytes);
  for (int s : written) replace_dir_atomic(partial(s), (fs::path(dir_) / kShardSplits[s]).string());
  committed_ = true;
  std::error_code ec;
  for (int s : emptied) {
    fs::remove_all(partial(s), ec);
    fs::remove_all(fs::path(dir_) / kShardSplits[s], ec);
  }
  if (only_this_tokenizer)
    for (const char* name : {"vocab.txt", "tokenizer.json", "tokenizer.model"})
      if (name != tokenizer_name) fs::remove(fs::path(dir_) / name, ec);
  fsync_dir(dir_);
}

}  // namespace dtrain
