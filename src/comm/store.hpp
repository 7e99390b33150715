// The key-value store every rank can reach (TCP or shared file system): rendezvous, backend
// bootstrap, liveness. Values are bytes; waits have timeouts and say which keys are missing.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

using Millis = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::optional<std::string> try_get(const std::string& key) = 0;
  // Atomically adds delta to the integer stored at key (missing = 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists; returns the keys still missing when the timeout ran out.
  virtual std::vector<std::string> wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  virtual void erase(const std::string& key) = 0;
  // A second, independent connection to the same store (for a background thread).
  virtual std::shared_ptr<Store> clone() const = 0;

  // Waits for key, then returns its value; throws naming the key and `what` on timeout.
  std::string get(const std::string& key, Millis timeout, const std::string& what = "");
};

// Every key under a prefix ("round3/" …), so one store serves many groups and restarts.
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}
  void set(const std::string& k, const std::string& v) override { base_->set(prefix_ + k, v); }
  std::optional<std::string> try_get(const std::string& k) override { return base_->try_get(prefix_ + k); }
  int64_t add(const std::string& k, int64_t d) override { return base_->add(prefix_ + k, d); }
  std::vector<std::string> wait(const std::vector<std::string>& keys, Millis timeout) override;
  void erase(const std::string& k) override { base_->erase(prefix_ + k); }
  std::shared_ptr<Store> clone() const override { return std::make_shared<PrefixStore>(base_->clone(), prefix_); }
  const std::string& prefix() const { return prefix_; }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// Constant-time comparison of job tokens.
bool tokens_equal(const std::string& a, const std::string& b);

}  // namespace dtrain
