// A device backend's operations through the process group, with a stand-in for NCCL (no GPU
// needed): the compute stream is marked when an operation is issued, on the issuing thread; the
// compute stream waits for it in Work::wait, on the waiting thread; and an operation the device
// never finishes ends the job at the timeout, naming the operation and the group, after the
// backend aborted its communicator.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "comm/process_group.hpp"

using namespace dtrain;

namespace {

// What the stand-in saw, shared with the test.
struct Seen {
  std::atomic<int> marks{0}, waits{0}, orders_alive{0};
  std::atomic<bool> finishes{true};  // whether the device "finishes" what is queued
  std::thread::id marked_on, waited_on;
  std::atomic<bool> ran_after_mark{false};
};

class StandInOrder final : public StreamOrder {
 public:
  explicit StandInOrder(Seen& s) : s_(s) { ++s_.orders_alive; }
  ~StandInOrder() override { --s_.orders_alive; }
  bool finished() override { return queued && s_.finishes; }
  void wait_on_compute() override {
    ++s_.waits;
    s_.waited_on = std::this_thread::get_id();
  }
  std::atomic<bool> queued{false};

 private:
  Seen& s_;
};

// Operations "queue" at once; the order says whether the device finished them.
class StandInDeviceBackend final : public Backend {
 public:
  explicit StandInDeviceBackend(Seen& s) : s_(s) {}
  std::shared_ptr<StreamOrder> mark_issue() override {
    ++s_.marks;
    s_.marked_on = std::this_thread::get_id();
    return std::make_shared<StandInOrder>(s_);
  }
  void use_order(std::shared_ptr<StreamOrder> order) override { current_ = std::move(order); }
  void allreduce(void*, size_t, ElemType, ReduceOp) override { queue(); }
  void allgather(const void*, void*, const std::vector<size_t>&, ElemType) override { queue(); }
  void reduce_scatter(const void*, void*, const std::vector<size_t>&, ElemType, ReduceOp) override { queue(); }
  void broadcast(void*, size_t, ElemType, int) override { queue(); }
  void all_to_all(const void*, void*, size_t, ElemType) override { queue(); }
  void all_to_all_v(const void*, const std::vector<size_t>&, void*, const std::vector<size_t>&, ElemType) override {
    queue();
  }
  std::function<void()> post_send(const void*, size_t, int, uint32_t) override { return [] {}; }
  std::function<void()> post_recv(void*, size_t, int, uint32_t) override { return [] {}; }
  void barrier() override { queue(); }
  bool gives_up() const override { return false; }
  [[noreturn]] void abort_job(const std::string& why) override {
    std::fprintf(stderr, "stand-in communicator aborted\n");
    Backend::abort_job(why);
  }

 private:
  void queue() {
    ASSERT_TRUE(current_) << "an operation ran without its order";
    if (s_.marks > 0) s_.ran_after_mark = true;
    static_cast<StandInOrder&>(*current_).queued = true;
    current_.reset();
  }
  Seen& s_;
  std::shared_ptr<StreamOrder> current_;
};

}  // namespace

TEST(DeviceOrder, MarkedWhenIssuedAndWaitedOnTheWaitingThread) {
  Seen seen;
  {
    ProcessGroup pg("standin", {0}, 0, Millis(2000), nullptr, std::make_unique<StandInDeviceBackend>(seen));
    float x[4] = {};
    std::vector<WorkPtr> works;
    for (int i = 0; i < 8; ++i) works.push_back(pg.allreduce_async(x, 4, ElemType::f32, ReduceOp::sum));
    EXPECT_EQ(seen.marks, 8) << "every operation marks the compute stream when it is issued";
    EXPECT_EQ(seen.marked_on, std::this_thread::get_id())
        << "marked on the issuing thread, not the communication thread";
    EXPECT_EQ(seen.waits, 0) << "nothing waits before Work::wait";
    for (auto& w : works) w->wait();
    EXPECT_EQ(seen.waits, 8) << "Work::wait makes the compute stream wait for the operation";
    EXPECT_EQ(seen.waited_on, std::this_thread::get_id());
    EXPECT_TRUE(seen.ran_after_mark);
    pg.allreduce(x, 4);  // the blocking form too
    EXPECT_EQ(seen.marks, 9);
    EXPECT_EQ(seen.waits, 9);
    works.clear();
    // Finished operations are let go (their orders back to the backend) as later ones begin, and
    // nothing fires after the timeout.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    pg.barrier();
  }
  EXPECT_EQ(seen.orders_alive, 0) << "orders of finished operations are released";
}

TEST(DeviceOrderDeathTest, AnOperationTheDeviceNeverFinishesEndsTheJobAtTheTimeout) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Seen seen;
        seen.finishes = false;
        ProcessGroup pg("grads", {0}, 0, Millis(1000), nullptr, std::make_unique<StandInDeviceBackend>(seen));
        float x[4] = {};
        pg.allreduce_async(x, 4, ElemType::f32, ReduceOp::sum)->wait();  // queued: the host goes on
        std::this_thread::sleep_for(std::chrono::seconds(20));
        std::fprintf(stderr, "the watchdog did not fire\n");
        std::_Exit(0);
      },
      testing::ExitedWithCode(2),
      "stand-in communicator aborted\ndtrain: error: allreduce sum of 16 B \\(operation #1 of process group "
      "'grads', 1 ranks\\) did not finish within 1 s \\(parallel.timeout_s\\)");
}
