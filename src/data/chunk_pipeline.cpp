// Reader, workers and the in-order writer of chunks (see chunk_pipeline.hpp).
#include "data/chunk_pipeline.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace dtrain {

namespace {

struct PipelineStopped {};  // thrown inside the reader when the pipeline stops early

class ChunkFlow : public ChunkQueue {
 public:
  explicit ChunkFlow(const ChunkPipeline& p) : p_(p) {}

  // A chunk once the budget has room for it: one written before (its buffers kept: no new pages to
  // fault in), or a new one when every chunk there is in flight. So the chunks in memory never
  // hold more than the budget.
  std::unique_ptr<Chunk> new_chunk() override {
    if (!p_.budget->acquire(chunk_budget_bytes())) throw PipelineStopped{};
    std::unique_ptr<Chunk> c;
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!spare_.empty()) {
        c = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    if (!c) {
      c = std::make_unique<Chunk>();
      c->text.reserve(kChunkTextBytes);
    }
    c->held_bytes = chunk_budget_bytes();
    return c;
  }
  void recycle(std::unique_ptr<Chunk> c) {
    c->clear();
    std::lock_guard<std::mutex> lock(m_);
    spare_.push_back(std::move(c));
  }
  void push(std::unique_ptr<Chunk> c) override {
    if (p_.input_read) c->input_done = p_.input_read->load();
    std::lock_guard<std::mutex> lock(m_);
    c->index = pushed_++;
    todo_.push_back(std::move(c));
    work_cv_.notify_one();
  }

  void read() {
    ChunkBuilder builder(*this);
    try {
      p_.read(builder);
      builder.finish();
    } catch (const PipelineStopped&) {
    } catch (...) {
      read_error_ = std::current_exception();
      try {
        builder.finish();  // the pieces before the error: their own errors come first
      } catch (...) {
      }
    }
    std::lock_guard<std::mutex> lock(m_);
    read_done_ = true;
    work_cv_.notify_all();
    done_cv_.notify_all();
  }

  void work() {
    for (;;) {
      std::unique_ptr<Chunk> c;
      {
        std::unique_lock<std::mutex> lock(m_);
        work_cv_.wait(lock, [&] { return stop_ || !todo_.empty() || read_done_; });
        if (stop_ || todo_.empty()) return;
        c = std::move(todo_.front());
        todo_.pop_front();
      }
      try {
        p_.encode(*c);
      } catch (...) {
        c->error = std::current_exception();
      }
      // Ids that came out longer than budgeted (one per byte of text) hold more.
      const int64_t over = int64_t(c->ids.capacity() * 4) - int64_t(kChunkTextBytes * 4);
      if (over > 0) {
        p_.budget->take(over);
        c->held_bytes += over;
      }
      std::lock_guard<std::mutex> lock(m_);
      const uint64_t index = c->index;
      done_[index] = std::move(c);
      done_cv_.notify_all();
    }
  }

  // The next chunk in order; nullptr at the end. Rethrows the reader's error once every chunk before
  // it is written.
  std::unique_ptr<Chunk> next() {
    std::unique_lock<std::mutex> lock(m_);
    done_cv_.wait(lock, [&] { return done_.count(written_) || (read_done_ && written_ == pushed_); });
    auto it = done_.find(written_);
    if (it == done_.end()) {
      if (read_error_) std::rethrow_exception(read_error_);
      return nullptr;
    }
    auto c = std::move(it->second);
    done_.erase(it);
    ++written_;
    return c;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    p_.budget->stop();
    work_cv_.notify_all();
    done_cv_.notify_all();
  }

 private:
  const ChunkPipeline& p_;
  std::mutex m_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::unique_ptr<Chunk>> todo_;
  std::vector<std::unique_ptr<Chunk>> spare_;  // written chunks, for new_chunk to fill again
  std::map<uint64_t, std::unique_ptr<Chunk>> done_;
  uint64_t pushed_ = 0, written_ = 0;
  bool read_done_ = false, stop_ = false;
  std::exception_ptr read_error_;
};

}  // namespace

void run_chunk_pipeline(const ChunkPipeline& p) {
  DT_ASSERT(p.workers >= 1 && p.budget);
  ChunkFlow flow(p);
  std::vector<std::thread> threads;
  std::exception_ptr error;
  try {
    threads.emplace_back([&] { flow.read(); });
    for (int i = 0; i < p.workers; ++i) threads.emplace_back([&] { flow.work(); });
    while (auto c = flow.next()) {
      if (c->error) std::rethrow_exception(c->error);
      p.write(*c);
      p.budget->release(c->held_bytes);
      flow.recycle(std::move(c));
    }
  } catch (...) {
    error = std::current_exception();
  }
  flow.stop();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace dtrain
