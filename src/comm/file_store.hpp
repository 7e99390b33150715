// A store in a folder on a shared file system (for clusters where ranks cannot open ports to
// each other before the backend starts): one file per key, written atomically; counters under
// an flock. The folder's TOKEN file ties it to one job.
#pragma once
#include <memory>

#include "comm/store.hpp"

namespace dtrain {

class FileStore : public Store {
 public:
  // Creates the folder if needed; throws when it belongs to a job with another token.
  FileStore(std::string dir, const std::string& token);
  void set(const std::string& key, const std::string& value) override;
  std::optional<std::string> try_get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<std::string> wait(const std::vector<std::string>& keys, Millis timeout) override;
  void erase(const std::string& key) override;
  std::shared_ptr<Store> clone() const override { return std::make_shared<FileStore>(*this); }

 private:
  std::string path(const std::string& key) const;
  std::string dir_;
};

}  // namespace dtrain
