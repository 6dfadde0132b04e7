// Runs the ranks of a tensor-parallel group together, one thread per rank (rank 0 on the caller's thread), and keeps
// the group's failure: a rank that throws records why and aborts the group (the other ranks' collectives then throw
// instead of waiting for it), and every later run is refused (docs/TENSOR_PARALLEL.md, "Ranks are threads of one
// process"). Shared by the CPU and CUDA tensor-parallel backends.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace qinfer {

class RankRunner {
 public:
  // `abort_group(reason)` ends the group's collectives; it is called once, from the thread of the first failure.
  explicit RankRunner(std::function<void(const std::string&)> abort_group) : abort_group_(std::move(abort_group)) {}

  // Runs work(r) for every r of [0, size) concurrently and returns when all have returned. Throws
  // Error(kUnavailable) naming the first failure when a rank throws, or when one failed in an earlier run.
  void run(size_t size, const std::function<void(size_t rank)>& work);

  // Empty, or the first rank failure. Safe to call from any thread.
  std::string failure() const;

 private:
  void fail(const std::string& reason);

  std::function<void(const std::string&)> abort_group_;
  mutable std::mutex mutex_;
  std::string failure_;
};

}  // namespace qinfer
