// Tests for the metrics writers: crc32c, TensorBoard event files (TFRecord framing checked by our
// own reader, protobuf content checked by our own decoder and by `protoc --decode_raw`), JSONL.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/crc32c.hpp"
#include "metrics/jsonl.hpp"
#include "metrics/tensorboard.hpp"

namespace fs = std::filesystem;
using namespace dtrain;

namespace {

fs::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path p = fs::temp_directory_path() /
               ("dtrain_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(s[at + size_t(i)])) << (8 * i);
  return v;
}

// Splits a TFRecord file into record payloads, checking both masked CRCs of every record.
std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < file.size()) {
    EXPECT_GE(file.size() - pos, 12u) << "partial record header at " << pos;
    if (file.size() - pos < 12) break;
    uint64_t len = le(file, pos, 8);
    uint32_t len_crc = uint32_t(le(file, pos + 8, 4));
    EXPECT_EQ(len_crc, crc32c_mask(crc32c(file.data() + pos, 8))) << "length crc at " << pos;
    EXPECT_LE(pos + 12 + len + 4, file.size());
    if (pos + 12 + len + 4 > file.size()) break;
    std::string data = file.substr(pos + 12, len);
    uint32_t data_crc = uint32_t(le(file, pos + 12 + len, 4));
    EXPECT_EQ(data_crc, crc32c_mask(crc32c(data.data(), data.size()))) << "data crc at " << pos;
    out.push_back(std::move(data));
    pos += 12 + len + 4;
  }
  return out;
}

// Minimal protobuf reader: field number -> raw value (varint/fixed as integer, bytes as string).
struct Field {
  uint32_t number, wire;
  uint64_t num = 0;
  std::string bytes;
};
std::vector<Field> decode(const std::string& msg) {
  std::vector<Field> out;
  size_t p = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; p < msg.size(); shift += 7) {
      uint8_t b = uint8_t(msg[p++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (p < msg.size()) {
    uint64_t key = varint();
    Field f{uint32_t(key >> 3), uint32_t(key & 7), 0, {}};
    if (f.wire == 0) {
      f.num = varint();
    } else if (f.wire == 1) {
      f.num = le(msg, p, 8);
      p += 8;
    } else if (f.wire == 5) {
      f.num = le(msg, p, 4);
      p += 4;
    } else if (f.wire == 2) {
      uint64_t n = varint();
      f.bytes = msg.substr(p, n);
      p += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.wire;
      break;
    }
    out.push_back(std::move(f));
  }
  return out;
}
const Field* field(const std::vector<Field>& fs, uint32_t number) {
  for (const auto& f : fs) {
    if (f.number == number) return &f;
  }
  return nullptr;
}
double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
float as_float(uint64_t bits) {
  uint32_t b = uint32_t(bits);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4 test vectors
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c_unmask(crc32c_mask(0xE3069283u)), 0xE3069283u);
}

TEST(Crc32c, HardwareMatchesTableAndExtends) {
  std::mt19937 rng(5);
  std::string buf(4099, '\0');
  for (char& c : buf) c = char(rng());
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t n : {0, 1, 7, 8, 9, 63, 64, 1000, 4092}) {
      EXPECT_EQ(crc32c(buf.data() + off, n), crc32c_portable(buf.data() + off, n)) << off << " " << n;
    }
  }
  uint32_t whole = crc32c(buf.data(), buf.size());
  EXPECT_EQ(crc32c(buf.data() + 1000, buf.size() - 1000, crc32c(buf.data(), 1000)), whole);
  EXPECT_EQ(crc32c_portable(buf.data() + 13, buf.size() - 13, crc32c_portable(buf.data(), 13)),
            whole);
  if (!crc32c_hardware()) std::printf("note: no SSE4.2 here; only the table version ran\n");
}

TEST(TensorBoard, WritesValidEventFile) {
  fs::path dir = temp_dir() / "run";  // does not exist yet: the writer creates it
  std::string path;
  {
    TensorBoardWriter w(dir.string());
    path = w.path();
    EXPECT_EQ(fs::path(path).parent_path(), dir);
    EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
    w.add_scalar("train/loss", 2.5f, 0);
    w.add_scalar("train/loss", 1.25f, 7);
    // Flushed after each add: visible before the writer is closed.
    EXPECT_EQ(read_records(slurp(path)).size(), 3u);
    w.add_scalar("lr", 3e-4f, int64_t(1) << 40);
  }
  auto records = read_records(slurp(path));
  ASSERT_EQ(records.size(), 4u);

  auto first = decode(records[0]);
  ASSERT_TRUE(field(first, 1) && field(first, 3));
  EXPECT_EQ(field(first, 1)->wire, 1u);
  EXPECT_GT(as_double(field(first, 1)->num), 1.5e9);  // a plausible unix time
  EXPECT_EQ(field(first, 3)->bytes, "brain.Event:2");

  struct Want {
    std::string tag;
    float value;
    int64_t step;
  };
  std::vector<Want> want{{"train/loss", 2.5f, 0}, {"train/loss", 1.25f, 7}, {"lr", 3e-4f, int64_t(1) << 40}};
  for (size_t i = 0; i < want.size(); ++i) {
    auto ev = decode(records[i + 1]);
    ASSERT_TRUE(field(ev, 1) && field(ev, 2) && field(ev, 5)) << i;
    EXPECT_EQ(field(ev, 2)->wire, 0u);
    EXPECT_EQ(int64_t(field(ev, 2)->num), want[i].step);
    auto summary = decode(field(ev, 5)->bytes);
    ASSERT_TRUE(field(summary, 1));
    auto value = decode(field(summary, 1)->bytes);
    ASSERT_TRUE(field(value, 1) && field(value, 2));
    EXPECT_EQ(field(value, 1)->bytes, want[i].tag);
    EXPECT_EQ(field(value, 2)->wire, 5u);
    EXPECT_EQ(as_float(field(value, 2)->num), want[i].value);
  }

  // A second writer in the same second gets its own file instead of clobbering the first.
  TensorBoardWriter w2(dir.string());
  EXPECT_NE(w2.path(), path);
  fs::remove_all(dir.parent_path());
}

TEST(TensorBoard, ProtocDecodesRecords) {
  if (std::system("command -v protoc >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "protoc not on PATH (install protobuf-compiler) - cannot cross-check encoding";
  }
  fs::path dir = temp_dir();
  std::string path;
  {
    TensorBoardWriter w(dir.string());
    path = w.path();
    w.add_scalar("eval/ppl", 12.75f, 123456);
  }
  auto records = read_records(slurp(path));
  ASSERT_EQ(records.size(), 2u);
  std::vector<std::string> decoded;
  for (size_t i = 0; i < records.size(); ++i) {
    fs::path in = dir / ("rec" + std::to_string(i)), out = dir / ("rec" + std::to_string(i) + ".txt");
    std::ofstream(in, std::ios::binary) << records[i];
    std::string cmd = "protoc --decode_raw < '" + in.string() + "' > '" + out.string() + "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(out);
    decoded.push_back(slurp(out));
  }
  EXPECT_NE(decoded[0].find("3: \"brain.Event:2\""), std::string::npos) << decoded[0];
  EXPECT_NE(decoded[1].find("1: \"eval/ppl\""), std::string::npos) << decoded[1];
  EXPECT_NE(decoded[1].find("2: 123456\n"), std::string::npos) << decoded[1];
  EXPECT_NE(decoded[1].find("2: 0x414c0000"), std::string::npos) << decoded[1];  // 12.75f
  fs::remove_all(dir);
}

TEST(TensorBoard, UnwritableDirGivesError) {
  fs::path dir = temp_dir();
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  try {
    TensorBoardWriter w((dir / "file" / "run").string());
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("choose a writable"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Jsonl, OneObjectPerLineFlushedAndAppended) {
  fs::path dir = temp_dir();
  fs::path path = dir / "sub" / "metrics.jsonl";
  {
    JsonlWriter w(path.string());
    Json a;
    a["step"] = 1;
    a["loss"] = 2.75;
    a["note"] = "multi\nline";
    w.write(a);
    EXPECT_EQ(slurp(path), "{\"step\":1,\"loss\":2.75,\"note\":\"multi\\nline\"}\n");  // flushed
  }
  {
    JsonlWriter w(path.string());  // reopening appends
    Json b;
    b["step"] = 2;
    w.write(b);
  }
  std::ifstream in(path);
  std::vector<Json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(parse_json(line, path.string()));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["note"], "multi\nline");
  EXPECT_EQ(lines[1]["step"], 2);
  fs::remove_all(dir);
}
