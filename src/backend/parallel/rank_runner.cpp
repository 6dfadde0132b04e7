#include "backend/parallel/rank_runner.h"

#include <exception>
#include <thread>
#include <vector>

#include "util/error.h"

namespace qinfer {

std::string RankRunner::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void RankRunner::fail(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    // The first failure names the cause; ranks that throw only because the group stopped come after it.
    if (!failure_.empty()) return;
    failure_ = reason;
  }
  abort_group_(reason);
}

void RankRunner::run(size_t size, const std::function<void(size_t rank)>& work) {
  if (std::string failed = failure(); !failed.empty())
    throw Error(ErrorKind::kUnavailable, "tensor-parallel backend stopped after a rank failed: " + failed);
  const auto run_rank = [&](size_t r) {
    try {
      work(r);
    } catch (const std::exception& e) {
      fail("rank " + std::to_string(r) + ": " + e.what());
    }
  };
  {
    std::vector<std::jthread> threads;
    try {
      for (size_t r = 1; r < size; ++r) threads.emplace_back(run_rank, r);
    } catch (const std::exception& e) {
      fail(std::string("cannot start the rank threads: ") + e.what());  // the started ranks stop at their collective
    }
    run_rank(0);
  }
  if (std::string failed = failure(); !failed.empty())
    throw Error(ErrorKind::kUnavailable, "tensor-parallel rank failed: " + failed);
}

}  // namespace qinfer
