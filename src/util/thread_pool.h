// Fixed pool of worker threads for data-parallel loops. Owned by whoever needs it (the CPU backend); no global pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qinfer {

class ThreadPool {
 public:
  // num_threads <= 0 picks the hardware concurrency.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) split into at most size() contiguous chunks, the calling thread taking one.
  // Blocks until all chunks are done. Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop(size_t index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_size_ = 0;
  size_t generation_ = 0;
  size_t pending_ = 0;
  bool stopping_ = false;
};

}  // namespace qinfer
