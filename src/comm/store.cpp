// Store helpers shared by every store kind (see store.hpp).
#include "comm/store.hpp"

#include "core/error.hpp"

namespace dtrain {

std::string Store::get(const std::string& key, Millis timeout, const std::string& what) {
  auto missing = wait({key}, timeout);
  if (missing.empty()) {
    if (auto v = try_get(key)) return *v;
  }
  throw Error("timed out after " + std::to_string(timeout.count() / 1000.0).substr(0, 5) + " s waiting for store key '" +
              key + "'" + (what.empty() ? "" : " (" + what + ")") +
              ": a rank or node did not arrive; check that every rank was started with the same job settings");
}

std::vector<std::string> PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  auto missing = base_->wait(full, timeout);
  for (auto& m : missing) m = m.substr(prefix_.size());
  return missing;
}

bool tokens_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace dtrain
