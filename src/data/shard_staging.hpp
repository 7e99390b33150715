// Where `dtrain data prepare --tokenizer` writes before anything is visible: DIR/SPLIT.partial (DIR locked),
// removed when the prepare fails, renamed into place after the tokenizer copy when it succeeds.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

class ShardStaging {
 public:
  // Creates out_dir when it is missing, locks it (flock) and removes stale SPLIT.partial folders
  // that a killed prepare left.
  explicit ShardStaging(const std::string& out_dir);
  // Without commit(): removes the staging folders, and out_dir when this made it and it is empty.
  ~ShardStaging();
  ShardStaging(const ShardStaging&) = delete;
  ShardStaging& operator=(const ShardStaging&) = delete;

  // DIR/SPLIT.partial for split 0 (train), 1 (valid) or 2 (test).
  std::string partial(int split) const;
  // Writes DIR/tokenizer_name atomically, renames each split in `written` from SPLIT.partial to SPLIT
  // (over an earlier one), and removes the splits in `emptied` and, with `only_this_tokenizer`, the
  // copies of other tokenizer kinds.
  void commit(const std::vector<int>& written, const std::vector<int>& emptied, const std::string& tokenizer_name,
              const std::string& tokenizer_bytes, bool only_this_tokenizer);

 private:
  std::string dir_;
  int lock_fd_ = -1;
  bool created_ = false, committed_ = false;
};

}  // namespace dtrain
