// The TCP store: a server (hosted by dtrun's agent or by rank 0) and its client. Every client
// proves the job token first; malformed, oversized or unauthenticated messages close that one
// connection and the server keeps serving. Protocol: docs/distributed.md.
#pragma once
#include <atomic>
#include <mutex>
#include <thread>

#include "comm/socket.hpp"
#include "comm/store.hpp"

namespace dtrain {

struct TcpStoreLimits {
  size_t max_message = 64u << 20;  // bytes in one request (key + value)
  size_t max_key = 4096;
  Millis hello_timeout{10000};     // a connection must authenticate within this
};

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: any free port) and serves on a background thread.
  TcpStoreServer(const std::string& host, int port, std::string token, TcpStoreLimits limits = {});
  ~TcpStoreServer();  // stops serving and closes every connection
  int port() const { return port_; }
  // Counters for tests and diagnostics.
  int64_t rejected() const { return rejected_.load(); }
  int64_t served() const { return served_.load(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<int64_t> rejected_{0}, served_{0};
};

class TcpStore : public Store {
 public:
  // Connects (retrying until connect_timeout, or until give_up says so) and authenticates with the
  // job token.
  TcpStore(const std::string& host, int port, const std::string& token, Millis connect_timeout,
           Millis op_timeout = Millis(300000), const std::function<bool()>& give_up = nullptr);
  void set(const std::string& key, const std::string& value) override;
  std::optional<std::string> try_get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<std::string> wait(const std::vector<std::string>& keys, Millis timeout) override;
  void erase(const std::string& key) override;
  std::shared_ptr<Store> clone() const override {
    return std::make_shared<TcpStore>(host_, port_, token_, op_timeout_, op_timeout_);
  }
  // The local address this client reaches the server from (the address peers can use for us).
  std::string local_address() const;
  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  std::pair<uint8_t, std::string> request(uint8_t op, const std::string& payload, Millis reply_timeout);

  std::string host_;
  int port_;
  std::string token_;
  Millis op_timeout_;
  std::mutex mu_;
  Socket sock_;
};

}  // namespace dtrain
