// TensorBoard event-file writer (see tensorboard.hpp). Record = uint64 length, masked crc32c of the
// length, data, masked crc32c of the data; data = an Event protobuf encoded by hand below.
#include "metrics/tensorboard.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/crc32c.hpp"

namespace dtrain {

namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}
void put_tag(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (field << 3) | wire); }
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += char(uint8_t(v >> (8 * i)));
}
void put_double(std::string& out, uint32_t field, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  put_tag(out, field, kFixed64);
  put_le(out, bits, 8);
}
void put_float(std::string& out, uint32_t field, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_tag(out, field, kFixed32);
  put_le(out, bits, 4);
}
void put_bytes(std::string& out, uint32_t field, const std::string& s) {
  put_tag(out, field, kBytes);
  put_varint(out, s.size());
  out += s;
}

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  std::string h = host_name();
  for (char& c : h) {
    if (c == '/') c = '_';
  }
  return h;
}

}  // namespace

void TensorBoardWriter::Close::operator()(std::FILE* f) const { std::fclose(f); }

TensorBoardWriter::TensorBoardWriter(const std::string& run_dir, const std::string& continue_file) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  require(!ec, "cannot create TensorBoard run directory " + run_dir + ": " + ec.message() +
                   "; choose a writable directory");
  if (!continue_file.empty()) {
    path_ = (std::filesystem::path(run_dir) / continue_file).string();
    file_.reset(std::fopen(path_.c_str(), "ab"));
    require(bool(file_), "cannot append to TensorBoard event file " + path_ + ": " + std::strerror(errno) +
                             "; choose a writable run directory");
    return;
  }
  long secs = long(std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count());
  std::string base = (std::filesystem::path(run_dir) /
                      ("events.out.tfevents." + std::to_string(secs) + "." + hostname()))
                         .string();
  for (int attempt = 1; !file_; ++attempt) {
    path_ = attempt == 1 ? base : base + "." + std::to_string(attempt);
    file_.reset(std::fopen(path_.c_str(), "wbx"));  // x: never clobber another writer's file
    if (!file_) {
      int err = errno;
      require(err == EEXIST && attempt < 1000, "cannot create TensorBoard event file " + path_ +
                                                   ": " + std::strerror(err) +
                                                   "; choose a writable run directory");
    }
  }
  event_.clear();
  put_double(event_, 1, wall_time_now());
  put_bytes(event_, 3, "brain.Event:2");
  write_record(event_);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() = default;

int64_t TensorBoardWriter::bytes() const {
  struct stat st {};
  return ::fstat(::fileno(file_.get()), &st) == 0 ? int64_t(st.st_size) : -1;
}

void TensorBoardWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  DT_ASSERT(file_);
  value_.clear();
  put_bytes(value_, 1, tag);
  put_float(value_, 2, value);
  summary_.clear();
  put_bytes(summary_, 1, value_);
  event_.clear();
  put_double(event_, 1, wall_time_now());
  put_tag(event_, 2, kVarint);
  put_varint(event_, static_cast<uint64_t>(step));
  put_bytes(event_, 5, summary_);
  write_record(event_);
  flush();
}

void TensorBoardWriter::write_record(const std::string& data) {
  record_.clear();
  put_le(record_, data.size(), 8);
  put_le(record_, crc32c_mask(crc32c(record_.data(), 8)), 4);
  record_ += data;
  put_le(record_, crc32c_mask(crc32c(data.data(), data.size())), 4);
  if (std::fwrite(record_.data(), 1, record_.size(), file_.get()) != record_.size()) {
    throw Error("cannot write TensorBoard event file " + path_ + ": " + std::strerror(errno) +
                "; free disk space or choose another run directory");
  }
}

void TensorBoardWriter::flush() {
  DT_ASSERT(file_);
  if (std::fflush(file_.get()) != 0) {
    throw Error("cannot write TensorBoard event file " + path_ + ": " + std::strerror(errno) +
                "; free disk space or choose another run directory");
  }
}

}  // namespace dtrain
