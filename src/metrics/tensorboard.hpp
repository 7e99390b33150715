// TensorBoardWriter: scalar summaries in a TensorBoard event file (TFRecord framing around
// hand-encoded Event protobufs), flushed after every scalar so a live TensorBoard sees them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace dtrain {

class TensorBoardWriter {
 public:
  // Creates run_dir if needed and the file run_dir/events.out.tfevents.<unix seconds>.<hostname>
  // (".2", ".3", ... appended if that name is taken), then writes the file_version record. With
  // continue_file (a file name in run_dir, as a resumed run has), appends to that file instead.
  explicit TensorBoardWriter(const std::string& run_dir, const std::string& continue_file = "");
  ~TensorBoardWriter();
  TensorBoardWriter(TensorBoardWriter&&) noexcept = default;
  TensorBoardWriter& operator=(TensorBoardWriter&&) noexcept = default;

  // Appends Event{wall_time, step, summary{value{tag, simple_value}}} and flushes.
  void add_scalar(const std::string& tag, float value, int64_t step);
  void flush();
  const std::string& path() const { return path_; }
  int64_t bytes() const;  // the file's size (everything is flushed)

 private:
  struct Close {
    void operator()(std::FILE* f) const;
  };
  void write_record(const std::string& data);

  std::string path_;
  std::unique_ptr<std::FILE, Close> file_;
  std::string value_, summary_, event_, record_;  // reused encode buffers
};

}  // namespace dtrain
