// Checkpoint chunk files (see chunk_io.hpp).
#include "ckpt/chunk_io.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "core/atomic_file.hpp"
#include "core/crc32c.hpp"
#include "core/input_file.hpp"

namespace dtrain {

void for_each_piece(const Box& box, const void* data, size_t elem, int64_t max_bytes,
                    const std::function<void(const Box&, const char*, size_t)>& fn) {
  const auto* bytes = static_cast<const char*>(data);
  for (const Box& piece : split_box(box, std::max<int64_t>(1, max_bytes / int64_t(elem))))
    fn(piece, bytes + size_t(offset_within(box, piece)) * elem, size_t(piece.volume()) * elem);
}

int64_t write_chunk_file(const std::string& dir, const std::string& file, const std::vector<ChunkSource>& sources,
                         CheckpointIndex& index, int64_t max_chunk_bytes) {
  AtomicFile out(dir + "/" + file);
  int64_t at = 0;
  static const std::vector<char> zeros(size_t(kChunkAlign), 0);
  for (const ChunkSource& s : sources)
    for_each_piece(s.box, s.data, dtype_size(s.dtype), max_chunk_bytes, [&](const Box& piece, const char* b, size_t n) {
      const int64_t pad = (kChunkAlign - at % kChunkAlign) % kChunkAlign;
      out.write(zeros.data(), size_t(pad));
      at += pad;
      out.write(b, n);
      index.add(s.tensor, s.dtype, s.shape, {piece, file, at, int64_t(n), crc32c(b, n)});
      at += int64_t(n);
    });
  out.commit();
  index.files[file] = {at, false, 0};
  return at;
}

namespace {

// The data files of one checkpoint, opened once each and checked against the sizes in the index.
class DataFiles {
 public:
  DataFiles(const std::string& dir, const CheckpointIndex& index) : dir_(dir), index_(index) {}
  ~DataFiles() {
    for (auto& [name, fd] : fds_) ::close(fd);
  }
  // The chunk's bytes into buf, checked against its checksum.
  void read(const ChunkRecord& c, std::vector<char>& buf) {
    const int fd = open(c.file);
    buf.resize(size_t(c.byte_size));
    size_t done = 0;
    while (done < buf.size()) {
      const ssize_t r = ::pread(fd, buf.data() + done, buf.size() - done, off_t(c.byte_offset + int64_t(done)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw CheckpointDamaged(path(c.file) + ": cannot read bytes " + std::to_string(c.byte_offset) + ".." +
                                std::to_string(c.byte_offset + c.byte_size) + " (" +
                                (r < 0 ? std::strerror(errno) : "end of file") + "): the file is damaged");
      done += size_t(r);
    }
    if (crc32c(buf.data(), buf.size()) != c.crc32c)
      throw CheckpointDamaged(path(c.file) + ": the chunk at bytes " + std::to_string(c.byte_offset) + ".." +
                              std::to_string(c.byte_offset + c.byte_size) +
                              " fails its checksum (the file is corrupt)");
  }

 private:
  std::string path(const std::string& f) const { return dir_ + "/" + f; }
  int open(const std::string& file) {
    auto it = fds_.find(file);
    if (it != fds_.end()) return it->second;
    int fd = -1;
    try {
      fd = open_regular_file(path(file));  // a pipe or a device is refused, never waited on or read
    } catch (const ResourceExhausted&) {
      throw;  // not damage: this process's limit
    } catch (const Error& e) {
      throw CheckpointDamaged(std::string(e.what()) + " (a file of the checkpoint: it is incomplete or damaged)");
    }
    struct stat sb {};
    ::fstat(fd, &sb);
    const FileRecord& rec = index_.files.at(file);
    if (int64_t(sb.st_size) != rec.bytes) {
      ::close(fd);
      throw CheckpointDamaged(path(file) + " is " + std::to_string(sb.st_size) + " bytes, the index says " +
                              std::to_string(rec.bytes) + ": it is truncated or was replaced");
    }
    if (rec.header_bytes > 0) {  // a safetensors header: what other readers (PyTorch) rely on
      std::vector<char> h(size_t(rec.header_bytes));
      const bool read = ::pread(fd, h.data(), h.size(), 0) == ssize_t(h.size());
      if (!read || crc32c(h.data(), h.size()) != rec.header_crc32c) {
        ::close(fd);
        throw CheckpointDamaged(path(file) + ": its header (bytes 0.." + std::to_string(rec.header_bytes) +
                                ") fails its checksum (the file is corrupt)");
      }
    }
    fds_[file] = fd;
    return fd;
  }
  std::string dir_;
  const CheckpointIndex& index_;
  std::map<std::string, int> fds_;
};

}  // namespace

ReadReport read_chunks(const std::string& dir, const CheckpointIndex& index, const std::vector<ChunkTarget>& targets) {
  // targets grouped by tensor, so each saved chunk is read once for all the targets it feeds
  std::map<std::string, std::vector<const ChunkTarget*>> by_tensor;
  for (const ChunkTarget& t : targets) by_tensor[t.tensor].push_back(&t);
  DataFiles files(dir, index);
  ReadReport rep;
  std::vector<char> buf;
  for (const auto& [name, wanted] : by_tensor) {
    auto it = index.tensors.find(name);
    // The caller checked that the index's model and optimizer are the ones it reads for, so a tensor
    // missing or of another shape is the index contradicting itself.
    if (it == index.tensors.end())
      throw CheckpointDamaged(dir + "/index.json lists no tensor " + name + ", which the model and optimizer it "
                              "records have: the index is damaged");
    const TensorRecord& rec = it->second;
    if (rec.shape != wanted[0]->shape || rec.dtype != wanted[0]->dtype)
      throw CheckpointDamaged(dir + "/index.json records " + name + " as " + dtype_name(rec.dtype) + " " +
                              shape_str(rec.shape) + ", but the model it records has " + dtype_name(wanted[0]->dtype) +
                              " " + shape_str(wanted[0]->shape) + ": the index is damaged");
    const size_t elem = dtype_size(rec.dtype);
    std::vector<int64_t> covered(wanted.size(), 0);
    for (const ChunkRecord& c : rec.chunks) {
      bool loaded = false;
      for (size_t i = 0; i < wanted.size(); ++i) {
        const auto region = intersect(c.box, wanted[i]->box);
        if (!region) continue;
        if (!loaded) {
          files.read(c, buf);
          rep.bytes_read += c.byte_size;
          ++rep.chunks_read;
          loaded = true;
        }
        copy_region(buf.data(), c.box, wanted[i]->data, wanted[i]->box, *region, elem);
        covered[i] += region->volume();
      }
    }
    for (size_t i = 0; i < wanted.size(); ++i)
      if (covered[i] != wanted[i]->box.volume())
        throw CheckpointDamaged("checkpoint " + dir + " holds only " + std::to_string(covered[i]) + " of the " +
                                std::to_string(wanted[i]->box.volume()) + " elements of " + name +
                                " this rank needs: its index is damaged");
  }
  return rep;
}

std::string read_indexed_file(const std::string& dir, const CheckpointIndex& index, const std::string& name) {
  const std::string path = dir + "/" + name;
  auto it = index.files.find(name);
  if (it == index.files.end()) throw CheckpointDamaged(path + " is not in the index (the checkpoint is incomplete)");
  require_present(path, "the checkpoint is incomplete");
  std::string bytes;
  try {
    bytes = read_file(path, size_t(std::max<int64_t>(it->second.bytes, 0)) + 1);  // no more than the index says
  } catch (const ResourceExhausted&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointDamaged(std::string(e.what()) + " (a file of the checkpoint: it is damaged)");
  }
  if (int64_t(bytes.size()) != it->second.bytes || crc32c(bytes.data(), bytes.size()) != it->second.crc32c)
    throw CheckpointDamaged(path + " does not match its size or checksum in the index (it is corrupt)");
  return bytes;
}

std::vector<std::string> verify_checkpoint(const std::string& dir, const CheckpointIndex& index) {
  std::vector<std::string> problems;
  std::set<std::string> seen;  // a short file fails every chunk in it: said once
  DataFiles files(dir, index);
  std::vector<char> buf;
  problems = index.tiling_problems(dir + "/index.json");
  for (const auto& [name, rec] : index.tensors) {
    for (const ChunkRecord& c : rec.chunks) {
      try {
        files.read(c, buf);
      } catch (const CheckpointDamaged& e) {
        if (seen.insert(e.what()).second) problems.push_back(std::string(e.what()) + " (tensor " + name + ")");
      }
    }
  }
  for (const auto& [name, f] : index.files) {
    if (!f.has_crc) continue;
    try {
      read_indexed_file(dir, index, name);
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

}  // namespace dtrain
