// The TCP store's client (see tcp_store.hpp): it proves the job token, then sends one request at a
// time and waits for its reply.
#include <cstring>

#include "comm/tcp_store.hpp"
#include "comm/tcp_store_wire.hpp"
#include "core/error.hpp"

namespace dtrain {

using namespace tcp_store_wire;

TcpStore::TcpStore(const std::string& host, int port, const std::string& token, Millis connect_timeout,
                   Millis op_timeout, const std::function<bool()>& give_up)
    : host_(host), port_(port), token_(token), op_timeout_(clamp_wait(op_timeout)) {
  sock_ = tcp_connect(host, port, connect_timeout, give_up);
  require(token.size() <= kMaxToken, "DTRAIN_JOB_TOKEN is longer than " + std::to_string(kMaxToken) + " bytes");
  std::string hello(kMagic, 4);
  put_u32(hello, uint32_t(token.size()));
  hello += token;
  const Deadline d = deadline_in(connect_timeout);
  uint8_t status = kFail;
  uint32_t len = 0;
  bool ok = send_all(sock_.fd(), hello.data(), hello.size(), d) && recv_all(sock_.fd(), &status, 1, d) &&
            recv_all(sock_.fd(), &len, 4, d) && len < 4096;
  std::string msg(ok ? len : 0, '\0');
  ok = ok && recv_all(sock_.fd(), msg.data(), len, d);
  require(ok, "the store at " + host + ":" + std::to_string(port) +
                  " did not answer the handshake: is that port a dtrain store"
                  " (dtrun's --rdzv-endpoint / MASTER_PORT)?");
  require(status == kOk, "the store at " + host + ":" + std::to_string(port) + " refused this process: " + msg);
}

std::pair<uint8_t, std::string> TcpStore::request(uint8_t op, const std::string& payload, Millis reply_timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string where = host_ + ":" + std::to_string(port_);
  require(sock_.valid(), "the connection to the store at " + where + " was lost earlier");
  const std::string f = frame(op, payload);
  const bool sent = send_all(sock_.fd(), f.data(), f.size(), deadline_in(op_timeout_));
  // A request the server refused before reading it whole still has its reason waiting.
  const Deadline d = deadline_in(sent ? reply_timeout : std::min(reply_timeout, Millis(1000)));
  uint8_t status = 0;
  uint32_t len = 0;
  bool ok = recv_all(sock_.fd(), &status, 1, d) && recv_all(sock_.fd(), &len, 4, d) && (sent || status == kFail);
  std::string reply(ok ? len : 0, '\0');
  ok = ok && recv_all(sock_.fd(), reply.data(), len, d);
  if (!ok) {
    sock_.close();
    throw Error("lost the connection to the store at " + where +
                " (its host exited or the network failed): the job cannot continue; see the launcher's log");
  }
  if (status == kFail) {
    sock_.close();
    throw Error("the store at " + where + " rejected a request: " + reply);
  }
  return {status, std::move(reply)};
}

void TcpStore::set(const std::string& key, const std::string& value) {
  std::string p;
  put_str(p, key);
  request(kSet, p + value, op_timeout_);
}

std::optional<std::string> TcpStore::try_get(const std::string& key) {
  std::string p;
  put_str(p, key);
  auto [status, v] = request(kGet, p, op_timeout_);
  if (status == kMissing) return std::nullopt;
  return v;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::string p;
  put_str(p, key);
  put_i64(p, delta);
  auto [status, v] = request(kAdd, p, op_timeout_);
  int64_t out = 0;
  require(v.size() == 8, "the store answered ADD with a malformed reply");
  std::memcpy(&out, v.data(), 8);
  return out;
}

std::vector<std::string> TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  // Cut to what the wire and the clocks hold: never negative, never past kLongestWait.
  const Millis t = clamp_wait(timeout);
  std::string p;
  put_i64(p, t.count());
  put_u32(p, uint32_t(keys.size()));
  for (const auto& k : keys) put_str(p, k);
  auto [status, v] = request(kWait, p, t + op_timeout_);
  std::vector<std::string> missing;
  if (status == kMissing) {
    Reader r{v.data(), v.size()};
    uint32_t n = r.u32();
    for (uint32_t i = 0; i < n && r.good; ++i) missing.push_back(r.str(1u << 20));
  }
  return missing;
}

void TcpStore::erase(const std::string& key) {
  std::string p;
  put_str(p, key);
  request(kDel, p, op_timeout_);
}

std::string TcpStore::local_address() const { return socket_local_address(sock_.fd()); }

}  // namespace dtrain
