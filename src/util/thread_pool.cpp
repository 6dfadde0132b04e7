#include "util/thread_pool.h"

#include <algorithm>

namespace qinfer {

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(static_cast<size_t>(i)); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
// Chunk `index` of `parts` over [0, n).
std::pair<size_t, size_t> chunk_range(size_t n, size_t parts, size_t index) {
  size_t base = n / parts, extra = n % parts;
  size_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}
}  // namespace

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  size_t parts = static_cast<size_t>(size());
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    pending_ = workers_.size();
    ++generation_;
  }
  work_ready_.notify_all();
  auto [begin, end] = chunk_range(n, parts, 0);
  if (begin < end) fn(begin, end);
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(size_t index) {
  size_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    size_t n;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n = job_size_;
    }
    auto [begin, end] = chunk_range(n, static_cast<size_t>(size()), index);
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace qinfer
