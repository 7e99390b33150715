// Tests for safetensors read/write (round trip, streaming writer, validation of damaged files) and
// atomic file and directory replacement.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/atomic_file.hpp"
#include "ckpt/safetensors.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "error_of.hpp"

namespace fs = std::filesystem;
using namespace dtrain;

namespace {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("dtrain_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};


bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

uint64_t header_len(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  return n;
}

// A file with one F32 [2,3], one BF16 [5] (odd byte count, so later data is unaligned), one I32 [2,2].
struct Sample {
  std::vector<float> f{1.5f, -2.f, 3.25f, 0.f, 1e-30f, -7.f};
  std::vector<uint16_t> b{0x3f80, 0xc000, 0x7f80, 0x0001, 0xffff};
  std::vector<int32_t> i{1, -2, 2147483647, -2147483647 - 1};
  std::vector<SafeTensorView> views() const {
    return {{"w.f32", DType::f32, {2, 3}, f.data()},
            {"emb.bf16", DType::bf16, {5}, b.data()},
            {"ids", DType::i32, {2, 2}, i.data()}};
  }
};

// Names of the entries in a directory, sorted.
std::vector<std::string> dir_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir dir;
  Sample s;
  const std::string path = dir / "model.safetensors";
  write_safetensors(path, s.views(), {{"step", "100"}, {"config", "{\"d\": 4}"}});

  std::string bytes = read_file(path);
  uint64_t n = header_len(bytes);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 24 + 10 + 16);
  Json header = parse_json(std::string_view(bytes).substr(8, n), path);
  EXPECT_EQ(header["w.f32"]["dtype"], "F32");
  EXPECT_EQ(header["emb.bf16"]["data_offsets"], Json::parse("[24, 34]"));
  EXPECT_EQ(header["ids"]["shape"], Json::parse("[2, 2]"));
  EXPECT_EQ(header["__metadata__"]["step"], "100");
  // The exact bytes (compact, in insertion order, space-padded to 8) that earlier dtrain wrote.
  EXPECT_EQ(bytes.substr(8, n),
            R"({"__metadata__":{"config":"{\"d\": 4}","step":"100"},)"
            R"("w.f32":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
            R"("emb.bf16":{"dtype":"BF16","shape":[5],"data_offsets":[24,34]},)"
            R"("ids":{"dtype":"I32","shape":[2,2],"data_offsets":[34,50]}}     )");

  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"w.f32", "emb.bf16", "ids"}));
  EXPECT_TRUE(f.contains("ids"));
  EXPECT_FALSE(f.contains("nope"));
  EXPECT_EQ(f.metadata().at("step"), "100");
  EXPECT_EQ(f.metadata().at("config"), "{\"d\": 4}");
  EXPECT_EQ(f.get("emb.bf16").dtype, DType::bf16);
  EXPECT_EQ(f.get("emb.bf16").shape, (std::vector<int64_t>{5}));

  std::vector<float> f2(6);
  std::vector<uint16_t> b2(5);
  std::vector<int32_t> i2(4);
  f.read_into("w.f32", DType::f32, {2, 3}, f2.data());
  f.read_into("emb.bf16", DType::bf16, {5}, b2.data());
  f.read_into("ids", DType::i32, {2, 2}, i2.data());
  EXPECT_EQ(std::memcmp(f2.data(), s.f.data(), 24), 0);
  EXPECT_EQ(b2, s.b);
  EXPECT_EQ(i2, s.i);
}

TEST(Safetensors, EmptyAndScalarTensors) {
  TempDir dir;
  float scalar = 4.f;
  write_safetensors(dir / "x.safetensors",
                    {{"empty", DType::f32, {0, 3}, nullptr}, {"scalar", DType::f32, {}, &scalar}});
  SafetensorsFile f(dir / "x.safetensors");
  EXPECT_TRUE(f.metadata().empty());
  float out = 0;
  f.read_into("scalar", DType::f32, {}, &out);
  EXPECT_EQ(out, 4.f);
  f.read_into("empty", DType::f32, {0, 3}, nullptr);
}

TEST(Safetensors, ReadIntoChecksShapeAndDtype) {
  TempDir dir;
  Sample s;
  write_safetensors(dir / "m.safetensors", s.views());
  SafetensorsFile f(dir / "m.safetensors");
  std::vector<float> out(6);
  std::string msg = error_of([&] { f.read_into("w.f32", DType::f32, {3, 2}, out.data()); });
  EXPECT_TRUE(contains(msg, "[2, 3]") && contains(msg, "[3, 2]") && contains(msg, "'w.f32'")) << msg;
  msg = error_of([&] { f.read_into("w.f32", DType::bf16, {2, 3}, out.data()); });
  EXPECT_TRUE(contains(msg, "F32") && contains(msg, "BF16")) << msg;
  msg = error_of([&] { f.get("missing.weight"); });
  EXPECT_TRUE(contains(msg, "'missing.weight'") && contains(msg, "m.safetensors")) << msg;
}

TEST(Safetensors, WriterRejectsBadInput) {
  TempDir dir;
  float x = 0;
  EXPECT_THROW(write_safetensors(dir / "a", {{"a", DType::f32, {1}, &x}, {"a", DType::f32, {1}, &x}}),
               Error);
  EXPECT_THROW(write_safetensors(dir / "a", {{"__metadata__", DType::f32, {1}, &x}}), Error);
  EXPECT_THROW(write_safetensors(dir / "a", {{"a", DType::f32, {-1}, &x}}), Error);
  EXPECT_THROW(write_safetensors(dir / "a", {{"a", DType::f32, {1}, nullptr}}), Error);
  EXPECT_FALSE(fs::exists(dir / "a"));
}

TEST(SafetensorsWriter, TensorByTensorEqualsWholeFileWrite) {
  TempDir dir;
  Sample s;
  const std::map<std::string, std::string> meta{{"step", "7"}, {"config", "{}"}};
  std::vector<SafeTensorView> views = s.views();
  float scalar = 2.5f;
  views.push_back({"empty", DType::f32, {0, 4}, nullptr});
  views.push_back({"scalar", DType::f32, {}, &scalar});
  write_safetensors(dir / "whole.safetensors", views, meta);

  const std::vector<SafeTensorSpec> specs = specs_of(views);
  SafetensorsWriter w(dir / "streamed.safetensors", specs, meta);
  for (const auto& v : views) {
    EXPECT_FALSE(w.done());
    EXPECT_EQ(w.next().name, v.name);
    EXPECT_EQ(w.next().shape, v.shape);
    // Each tensor lives in its own short-lived buffer, as a gathered FSDP unit would.
    size_t nbytes = size_t(shape_numel(v.shape)) * dtype_size(v.dtype);
    std::vector<char> buf(static_cast<const char*>(v.data), static_cast<const char*>(v.data) + nbytes);
    w.append(nbytes ? buf.data() : nullptr);
  }
  EXPECT_TRUE(w.done());
  EXPECT_FALSE(fs::exists(dir / "streamed.safetensors"));  // appears only on commit
  w.commit();

  EXPECT_EQ(read_file(dir / "streamed.safetensors"), read_file(dir / "whole.safetensors"));
  SafetensorsFile f(dir / "streamed.safetensors");
  EXPECT_EQ(f.names(), (std::vector<std::string>{"w.f32", "emb.bf16", "ids", "empty", "scalar"}));
  EXPECT_EQ(f.metadata(), meta);
  std::vector<uint16_t> b2(5);
  f.read_into("emb.bf16", DType::bf16, {5}, b2.data());
  EXPECT_EQ(b2, s.b);
  std::vector<int32_t> i2(4);
  f.read_into("ids", DType::i32, {2, 2}, i2.data());
  EXPECT_EQ(i2, s.i);
  float out = 0;
  f.read_into("scalar", DType::f32, {}, &out);
  EXPECT_EQ(out, 2.5f);
  EXPECT_EQ(dir_names(dir.path()),
            (std::vector<std::string>{"streamed.safetensors", "whole.safetensors"}));
}

TEST(SafetensorsWriter, TensorsInPartsEqualWholeTensors) {
  TempDir dir;
  Sample s;
  const std::vector<SafeTensorView> views = s.views();
  write_safetensors(dir / "whole.safetensors", views);
  const std::string path = dir / "parts.safetensors";
  SafetensorsWriter w(path, specs_of(views));
  uint64_t next = w.data_start();
  for (const auto& v : views) {
    const size_t nbytes = size_t(shape_numel(v.shape)) * dtype_size(v.dtype);
    const char* b = static_cast<const char*>(v.data);
    // a tensor in parts of 3 bytes (the last shorter): each part starts where the one before ended
    for (size_t i = 0; i < nbytes; i += 3) {
      const size_t n = std::min<size_t>(3, nbytes - i);
      EXPECT_EQ(w.append_part(b + i, n), next);
      next += n;
    }
  }
  EXPECT_TRUE(w.done());
  w.commit();
  EXPECT_EQ(read_file(path), read_file(dir / "whole.safetensors"));

  SafetensorsWriter too_much(dir / "x.safetensors", specs_of(views));
  const std::vector<char> big(64, 0);
  const std::string msg = error_of([&] { too_much.append_part(big.data(), big.size()); });
  EXPECT_TRUE(contains(msg, "64 bytes given for tensor 'w.f32'") && contains(msg, "left")) << msg;
}

TEST(SafetensorsWriter, DestroyedBeforeCommitLeavesNothing) {
  TempDir dir;
  Sample s;
  const std::vector<SafeTensorView> views = s.views();
  const std::vector<SafeTensorSpec> specs = specs_of(views);
  {
    SafetensorsWriter w(dir / "new.safetensors", specs);
    w.append(views[0].data);
    EXPECT_EQ(dir_names(dir.path()).size(), 1u);  // the temporary, while writing
  }
  EXPECT_TRUE(dir_names(dir.path()).empty());  // no file, no temporary

  // An existing file at the path is left as it was.
  write_file_atomic(dir / "old.safetensors", std::string_view("old"));
  {
    SafetensorsWriter w(dir / "old.safetensors", specs);
    for (const auto& v : views) w.append(v.data);
  }
  EXPECT_EQ(read_file(dir / "old.safetensors"), "old");
  EXPECT_EQ(dir_names(dir.path()), (std::vector<std::string>{"old.safetensors"}));
}

TEST(SafetensorsWriter, WrongNumberOfAppendsFails) {
  TempDir dir;
  Sample s;
  const std::vector<SafeTensorView> views = s.views();
  const std::vector<SafeTensorSpec> specs = specs_of(views);
  const std::string path = dir / "m.safetensors";
  {
    SafetensorsWriter w(path, specs);
    w.append(views[0].data);
    std::string msg = error_of([&] { w.commit(); });
    EXPECT_TRUE(contains(msg, path) && contains(msg, "1 of 3") && contains(msg, "'emb.bf16'")) << msg;
  }
  EXPECT_FALSE(fs::exists(path));
  {
    SafetensorsWriter w(path, specs);
    for (const auto& v : views) w.append(v.data);
    float extra = 1.f;
    std::string msg = error_of([&] { w.append(&extra); });
    EXPECT_TRUE(contains(msg, path) && contains(msg, "after all 3")) << msg;
    EXPECT_THROW(w.next(), std::logic_error);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(dir_names(dir.path()).empty());
}

TEST(SafetensorsWriter, SameValidationErrorsAsWriteSafetensors) {
  TempDir dir;
  float x = 0;
  const std::string path = dir / "a";
  auto both = [&](const std::vector<SafeTensorView>& views) {
    const std::vector<SafeTensorSpec> specs = specs_of(views);
    std::string whole = error_of([&] { write_safetensors(path, views); });
    std::string streamed = error_of([&] {
      SafetensorsWriter w(path, specs);
      for (const auto& v : views) w.append(v.data);
      w.commit();
    });
    EXPECT_FALSE(whole.empty());
    EXPECT_EQ(whole, streamed);
    return whole;
  };
  EXPECT_TRUE(contains(both({{"a", DType::f32, {1}, &x}, {"a", DType::f32, {1}, &x}}), "'a' appears twice"));
  EXPECT_TRUE(contains(both({{"", DType::f32, {1}, &x}}), "empty name"));
  EXPECT_TRUE(contains(both({{"a", DType::f32, {2, -1}, &x}}), "negative dimension"));
  EXPECT_TRUE(contains(both({{"a", DType::f32, {1}, &x}, {"b", DType::f32, {3}, nullptr}}),
                       "'b' has no data pointer"));
  EXPECT_TRUE(dir_names(dir.path()).empty());
}

TEST(Safetensors, DamagedFilesGiveErrors) {
  TempDir dir;
  Sample s;
  const std::string good_path = dir / "good.safetensors";
  write_safetensors(good_path, s.views());
  const std::string good = read_file(good_path);
  const uint64_t n = header_len(good);
  const std::string header(good.substr(8, n));
  const std::string bad_path = dir / "bad.safetensors";

  auto with_header = [&](std::string h) {
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint8_t(h.size() >> (8 * i)));
    return out + h + good.substr(8 + n);
  };
  auto load_error = [&](const std::string& bytes) {
    write_file_atomic(bad_path, bytes);
    return error_of([&] { SafetensorsFile f(bad_path); });
  };
  auto replace = [&](std::string text, const std::string& from, const std::string& to) {
    size_t p = text.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return text.replace(p, from.size(), to);
  };

  std::string msg = load_error("abc");
  EXPECT_TRUE(contains(msg, "too short") && contains(msg, bad_path)) << msg;
  msg = load_error(good.substr(0, 8) + "{}");
  EXPECT_TRUE(contains(msg, "truncated or corrupt")) << msg;
  msg = load_error(good.substr(0, good.size() - 3));  // data cut short
  EXPECT_TRUE(contains(msg, "is truncated") && contains(msg, "'ids'")) << msg;
  msg = load_error(with_header("{\"a\": [1, 2"));
  EXPECT_TRUE(contains(msg, "corrupt header") && contains(msg, "invalid JSON")) << msg;
  msg = load_error(with_header("[1, 2]"));
  EXPECT_TRUE(contains(msg, "expected an object")) << msg;
  msg = load_error(with_header(replace(header, "\"I32\"", "\"F16\"")));
  EXPECT_TRUE(contains(msg, "dtype F16") && contains(msg, "'ids'")) << msg;
  msg = load_error(with_header(replace(header, "[24,34]", "[24,36]")));
  EXPECT_TRUE(contains(msg, "do not match shape")) << msg;
  msg = load_error(with_header(replace(header, "[24,34]", "[20,30]")));  // overlaps w.f32
  EXPECT_TRUE(contains(msg, "overlap")) << msg;
  msg = load_error(with_header(replace(header, "[34,50]", "[1000,1016]")));
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  msg = load_error(with_header(replace(header, "[34,50]", "[-2,14]")));
  EXPECT_TRUE(contains(msg, "non-negative integers")) << msg;
  msg = load_error(with_header(replace(header, "[2,3]", "[2,\"3\"]")));
  EXPECT_TRUE(contains(msg, "not a non-negative integer")) << msg;
  msg = load_error(with_header(replace(header, "[2,3]", "[4294967296,4294967296,4294967296]")));
  EXPECT_TRUE(contains(msg, "impossibly large")) << msg;
  msg = load_error(with_header(replace(header, "\"dtype\":\"I32\",", "")));
  EXPECT_TRUE(contains(msg, "lacks dtype")) << msg;
  msg = load_error(with_header("{\"__metadata__\": {\"k\": 1}}"));
  EXPECT_TRUE(contains(msg, "expected a string")) << msg;
  std::string huge = good;
  huge[7] = char(0x7f);  // header length ~2^63
  msg = load_error(huge);
  EXPECT_TRUE(contains(msg, "truncated or corrupt")) << msg;
  msg = error_of([&] { SafetensorsFile f(dir / "nothere.safetensors"); });
  EXPECT_TRUE(contains(msg, "no such file; check the path")) << msg;
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  TempDir dir;
  Sample s;
  write_safetensors(dir / "good.safetensors", s.views(), {{"k", "v"}});
  const std::string good = read_file(dir / "good.safetensors");
  std::mt19937 rng(3);
  int rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = good;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = char(rng());
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    // Plain write, no fsync; removing first avoids ext4's flush-on-close after truncation.
    fs::remove(dir / "bad.safetensors");
    std::ofstream(dir / "bad.safetensors", std::ios::binary) << bytes;
    try {
      SafetensorsFile f(dir / "bad.safetensors");
      for (const auto& name : f.names()) {  // whatever loads must be readable within bounds
        const auto& t = f.get(name);
        std::vector<char> buf(size_t(shape_numel(t.shape)) * dtype_size(t.dtype) + 1);
        f.read_into(name, t.dtype, t.shape, buf.data());
      }
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(AtomicFile, WriteReplacesAndLeavesNoTemp) {
  TempDir dir;
  const std::string path = dir / "f.bin";
  write_file_atomic(path, std::string_view("old contents"));
  EXPECT_EQ(read_file(path), "old contents");
  write_file_atomic(path, std::string_view("new"));
  EXPECT_EQ(read_file(path), "new");
  Sample s;
  write_safetensors(dir / "m.safetensors", s.views());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"f.bin", "m.safetensors"}));
}

TEST(AtomicFile, FailedWriteLeavesOldFileIntact) {
  TempDir dir;
  const std::string path = dir / "keep.safetensors";
  Sample s;
  write_safetensors(path, s.views());
  const std::string before = read_file(path);
  // The writer rejects this (and removes its temporary) ...
  EXPECT_THROW(write_safetensors(path, {{"x", DType::f32, {4}, nullptr}}), Error);
  EXPECT_EQ(read_file(path), before);
  // ... and a write into a missing directory fails cleanly with a fix in the message.
  std::string msg = error_of([&] { write_file_atomic(dir / "no/such/dir/f", std::string_view("x")); });
  EXPECT_TRUE(contains(msg, "create the directory")) << msg;
  // A temporary cannot replace a directory: rename fails, the temp is removed.
  fs::create_directories(dir / "adir");
  EXPECT_THROW(write_file_atomic(dir / "adir", std::string_view("x")), Error);
  EXPECT_TRUE(fs::is_directory(dir / "adir"));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp.")) << e.path();
  }
}

TEST(AtomicFile, ReadFileErrors) {
  TempDir dir;
  EXPECT_EQ(error_of([&] { read_file(dir / "missing"); }),
            "cannot read " + (dir / "missing") + ": no such file; check the path");
  EXPECT_TRUE(contains(error_of([&] { read_file(dir.path().string()); }), "it is a folder, not a regular file"));
  // A pipe is refused at once (never waited on), a device never read to its (absent) end.
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0644), 0);
  EXPECT_TRUE(contains(error_of([&] { read_file(dir / "pipe"); }), "it is a named pipe (FIFO), not a regular file"));
  EXPECT_TRUE(contains(error_of([&] { read_file("/dev/zero", 1 << 20, "config"); }),
                       "cannot read config /dev/zero: it is a device"));
  write_file_atomic(dir / "empty", nullptr, 0);
  EXPECT_EQ(read_file(dir / "empty"), "");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 7);
  write_file_atomic(dir / "big", big);
  EXPECT_EQ(read_file(dir / "big"), big);
  EXPECT_TRUE(contains(error_of([&] { read_file(dir / "big", 1 << 20, "summary"); }),
                       "it holds 3 MiB, more than a summary can (1 MiB)"));
}

TEST(AtomicFile, ReplaceDir) {
  TempDir dir;
  const std::string final_dir = dir / "ckpt";
  const std::string staged = dir / "ckpt.staging";
  fs::create_directories(staged);
  write_file_atomic(staged + "/a", std::string_view("v1"));
  replace_dir_atomic(staged, final_dir);  // no previous final
  EXPECT_EQ(read_file(final_dir + "/a"), "v1");
  EXPECT_FALSE(fs::exists(staged));

  fs::create_directories(staged);
  write_file_atomic(staged + "/b", std::string_view("v2"));
  replace_dir_atomic(staged + "/", final_dir + "/");  // trailing slashes are fine
  EXPECT_EQ(read_file(final_dir + "/b"), "v2");
  EXPECT_FALSE(fs::exists(final_dir + "/a"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  EXPECT_EQ(names, (std::vector<std::string>{"ckpt"}));  // no staging or .old.<pid> left

  std::string msg = error_of([&] { replace_dir_atomic(dir / "nope", final_dir); });
  EXPECT_TRUE(contains(msg, "does not exist")) << msg;
  EXPECT_EQ(read_file(final_dir + "/b"), "v2");
}
