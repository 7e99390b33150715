// Text and JSONL corpus files read into document pieces: a file or a line per document for text,
// a line per document for JSONL (parsed by the workers, or here when it is longer than a piece).
#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "data/corpus_reader.hpp"
#include "data/io_util.hpp"
#include "data/json_document.hpp"

namespace dtrain {

namespace {

constexpr size_t kReadBlock = size_t(1) << 20;
constexpr size_t kBinaryProbe = size_t(64) << 10;  // a NUL byte among the first this many bytes: not text

// A corpus file's (decompressed) bytes, read block by block into a buffer the caller consumes.
class BlockReader {
 public:
  BlockReader(const CorpusFile& file, CorpusCursor& cursor)
      : file_(file), cursor_(cursor), in_(open_byte_stream(file.path, file.compression)) {}
  std::string_view data() const { return std::string_view(buf_).substr(start_); }
  bool eof() const { return eof_; }
  void consume(size_t n) { start_ += n; }
  // Appends one more block to data(); false at the end of the file.
  bool fill() {
    if (start_ > 0 && start_ >= buf_.size() / 2) {
      buf_.erase(0, start_);
      start_ = 0;
    }
    const size_t old = buf_.size();
    buf_.resize(old + kReadBlock);
    const size_t got = in_->read(buf_.data() + old, kReadBlock);
    buf_.resize(old + got);
    probe_binary(std::string_view(buf_).substr(old));
    cursor_.consumed = cursor_.files_done_bytes + in_->consumed();
    eof_ = got == 0;
    return !eof_;
  }

 private:
  void probe_binary(std::string_view block) {
    if (probed_ >= kBinaryProbe) return;
    const std::string_view head = block.substr(0, kBinaryProbe - probed_);
    const size_t nul = head.find('\0');
    require(nul == std::string_view::npos,
            "input " + file_.path + " is a binary file, not text (a NUL byte at byte " + std::to_string(probed_ + nul) +
                " of its content): give text, JSONL or HDF5 files, or leave it out");
    probed_ += head.size();
  }
  const CorpusFile& file_;
  CorpusCursor& cursor_;
  std::unique_ptr<ByteStream> in_;
  std::string buf_;
  size_t start_ = 0;
  size_t probed_ = 0;
  bool eof_ = false;
};

std::string_view without_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// A document per non-blank line; a line longer than a piece goes out in pieces.
void read_lines(BlockReader& r, uint32_t index, CorpusCursor& c) {
  DocPiece p;
  p.file = index;
  bool open = false;  // a long line's first pieces are out
  for (;;) {
    const std::string_view d = r.data();
    const size_t nl = d.find('\n');
    if (nl == std::string_view::npos && !r.eof() && d.size() <= kPieceBytes) {
      r.fill();
      continue;
    }
    const size_t line_end = nl == std::string_view::npos ? d.size() : nl;
    if (line_end > kPieceBytes) {
      if (!open) p.doc = c.next_doc++;
      p.first = !open;
      p.last = false;
      open = true;
      const size_t cut = piece_cut(d);
      c.out.add_text(p, d.substr(0, cut));
      r.consume(cut);
      continue;
    }
    if (nl == std::string_view::npos && d.empty() && !open) break;
    const std::string_view line = without_cr(d.substr(0, line_end));
    if (open || !data_io::is_blank(line)) {
      if (!open) p.doc = c.next_doc++;
      p.first = !open;
      p.last = true;
      c.out.add_text(p, line);
    }
    open = false;
    r.consume(nl == std::string_view::npos ? d.size() : nl + 1);
    if (nl == std::string_view::npos) break;
  }
}

// The whole file, one document, in pieces.
void read_whole(BlockReader& r, uint32_t index, CorpusCursor& c) {
  DocPiece p;
  p.doc = c.next_doc++;
  p.file = index;
  p.first = true;
  for (;;) {
    while (!r.eof() && r.data().size() <= kPieceBytes) r.fill();
    const std::string_view d = r.data();
    if (d.size() <= kPieceBytes) {
      p.last = true;
      c.out.add_text(p, d);
      r.consume(d.size());
      return;
    }
    const size_t cut = piece_cut(d);
    c.out.add_text(p, d.substr(0, cut));
    r.consume(cut);
    p.first = false;
  }
}

// The memory a JSONL line longer than a piece is read into, taken from the budget as it grows.
class LongLineHold {
 public:
  explicit LongLineHold(CorpusCursor& c) : c_(c) {}
  ~LongLineHold() { c_.budget.release(2 * held_); }
  void grow_to(int64_t bytes, const std::string& path, int64_t line) {
    const int64_t most = (c_.budget.limit() - 2 * chunk_budget_bytes()) / 2;
    require(bytes <= most, "line " + std::to_string(line) + " of " + path + " holds a document of over " +
                               std::to_string(most >> 20) + " MiB, more than --memory-mib allows for one JSONL "
                               "line: raise --memory-mib, or split the document");
    if (bytes <= held_) return;
    const int64_t more = 2 * (bytes - held_);  // the line and its text
    if (!c_.budget.try_acquire(more)) {
      c_.out.finish();  // before waiting: the writer may be waiting for the chunk being filled
      if (!c_.budget.acquire(more)) return;
    }
    held_ = bytes;
  }

 private:
  CorpusCursor& c_;
  int64_t held_ = 0;
};

}  // namespace

size_t piece_cut(std::string_view s) {
  DT_ASSERT(s.size() > kPieceBytes);
  const std::string_view head = s.substr(0, kPieceBytes);
  const size_t nl = head.rfind('\n');
  if (nl != std::string_view::npos) return nl + 1;
  const size_t space = head.rfind(' ');
  if (space != std::string_view::npos && space > 0) return space;  // the space starts the next piece
  size_t i = kPieceBytes;
  for (int k = 0; k < 3 && i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; ++k) --i;
  return i > 0 ? i : kPieceBytes;
}

void add_document_text(CorpusCursor& c, uint32_t file, int64_t line, std::string_view text) {
  DocPiece p;
  p.doc = c.next_doc++;
  p.file = file;
  p.line = line;
  p.first = true;
  while (text.size() > kPieceBytes) {
    const size_t cut = piece_cut(text);
    c.out.add_text(p, text.substr(0, cut));
    text.remove_prefix(cut);
    p.first = false;
  }
  p.last = true;
  c.out.add_text(p, text);
}

void read_text_file(const CorpusFile& file, uint32_t index, const CorpusReadOptions& options, CorpusCursor& cursor) {
  BlockReader r(file, cursor);
  if (options.docs_by_line) return read_lines(r, index, cursor);
  read_whole(r, index, cursor);
}

void read_jsonl_file(const CorpusFile& file, uint32_t index, const CorpusReadOptions& options, CorpusCursor& c) {
  BlockReader r(file, c);
  int64_t line_no = 0;
  std::unique_ptr<LongLineHold> hold;  // while a line longer than a piece is read
  size_t searched = 0;                 // data()'s first bytes known to hold no newline
  for (;;) {
    const std::string_view d = r.data();
    const size_t nl = d.find('\n', searched);
    searched = nl == std::string_view::npos ? d.size() : 0;
    if (nl == std::string_view::npos && !r.eof()) {
      if (d.size() > kPieceBytes) {
        if (!hold) hold = std::make_unique<LongLineHold>(c);
        hold->grow_to(int64_t(d.size() + kReadBlock), file.path, line_no + 1);
      }
      r.fill();
      continue;
    }
    if (nl == std::string_view::npos && d.empty()) break;
    ++line_no;
    const std::string_view line = without_cr(d.substr(0, nl == std::string_view::npos ? d.size() : nl));
    if (line.size() > kPieceBytes) {
      with_json_document(line, options.text_key, file.path, line_no,
                         [&](std::string_view text) { add_document_text(c, index, line_no, text); });
    } else if (!data_io::is_blank(line)) {
      DocPiece p;
      p.doc = c.next_doc++;
      p.file = index;
      p.line = line_no;
      p.kind = PieceKind::json_line;
      p.first = p.last = true;
      c.out.add_text(p, line);
    }
    hold.reset();
    r.consume(nl == std::string_view::npos ? d.size() : nl + 1);
    if (nl == std::string_view::npos) break;
  }
}

void read_corpus(const std::vector<CorpusFile>& files, const CorpusReadOptions& options, CorpusCursor& cursor) {
  for (size_t i = 0; i < files.size(); ++i) {
    const CorpusFile& f = files[i];
    if (f.format == CorpusFormat::hdf5) {
      read_hdf5_file(f, uint32_t(i), options, cursor);
    } else if (f.format == CorpusFormat::jsonl) {
      read_jsonl_file(f, uint32_t(i), options, cursor);
    } else {
      read_text_file(f, uint32_t(i), options, cursor);
    }
    cursor.files_done_bytes += f.bytes;
    cursor.consumed = cursor.files_done_bytes;
  }
}

}  // namespace dtrain
