// The TCP store's wire format, shared by its server and its client: the hello's magic, the
// request and status codes, and the little-endian framing and payload codec. Protocol: docs/distributed.md.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace dtrain::tcp_store_wire {

constexpr char kMagic[4] = {'D', 'T', 'S', '1'};
constexpr size_t kMaxToken = 1024;
enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kDel = 5 };
enum Status : uint8_t { kOk = 0, kMissing = 1, kFail = 2 };

inline void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
inline void put_i64(std::string& s, int64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
inline void put_str(std::string& s, const std::string& v) {
  put_u32(s, uint32_t(v.size()));
  s += v;
}

// One message: its code (a request's op or a reply's status), the payload's length, the payload.
inline std::string frame(uint8_t code, const std::string& payload) {
  std::string f(1, char(code));
  put_u32(f, uint32_t(payload.size()));
  return f + payload;
}

// Bounds-checked reader over a request payload; `good` turns false on any overrun.
struct Reader {
  const char* p;
  size_t left;
  bool good = true;
  uint32_t u32() {
    uint32_t v = 0;
    take(&v, 4);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    take(&v, 8);
    return v;
  }
  std::string str(size_t max) {
    uint32_t n = u32();
    if (!good || n > left || n > max) {
      good = false;
      return {};
    }
    std::string s(p, n);
    p += n;
    left -= n;
    return s;
  }
  std::string rest() {
    std::string s(p, left);
    p += left;
    left = 0;
    return s;
  }
  void take(void* dst, size_t n) {
    if (!good || left < n) {
      good = false;
      return;
    }
    std::memcpy(dst, p, n);
    p += n;
    left -= n;
  }
};

}  // namespace dtrain::tcp_store_wire
