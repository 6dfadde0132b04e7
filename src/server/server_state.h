// State shared by the HTTP handlers: options, metrics, admission, the response cache, and — once the
// model is loaded — the runtime (engine, prompt builder, model facts). Handlers read the runtime through an atomic
// pointer, so the HTTP server can answer /health (503) while the model loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar_compiler.h"
#include "server/admission.h"
#include "server/engine_watchdog.h"
#include "server/gpu_probe.h"
#include "server/prompt_builder.h"
#include "server/response_cache.h"
#include "server/server_metrics.h"
#include "server/server_options.h"

namespace qinfer::server {

// What exists once the model is loaded and warmed up. Owned by the caller of ServerState::set_runtime, which keeps it
// alive until the HTTP server has stopped.
struct ModelRuntime {
  Engine* engine = nullptr;
  const PromptBuilder* prompts = nullptr;
  grammar::GrammarCompiler* grammars = nullptr;  // compiles structured-output constraints (cached by their text)
  const EngineWatchdog* watchdog = nullptr;
  std::string served_model_name;
  int32_t max_model_len = 0;
  int32_t vocab_size = 0;
  GenerationDefaults defaults;
  int64_t created = 0;  // unix time the model became ready
};

// Engine ids of the generation requests being served, so that shutdown can abort what outlives the grace period.
class InFlightRequests {
 public:
  // Registered for its lifetime.
  class Entry {
   public:
    Entry(InFlightRequests& owner, uint64_t id) : owner_(&owner), id_(id) { owner.add(id); }
    Entry(Entry&& other) noexcept : owner_(other.owner_), id_(other.id_) { other.owner_ = nullptr; }
    Entry& operator=(Entry&&) = delete;
    ~Entry() {
      if (owner_) owner_->remove(id_);
    }

   private:
    InFlightRequests* owner_;
    uint64_t id_;
  };

  std::vector<uint64_t> ids() const {
    std::lock_guard lock(mutex_);
    return {ids_.begin(), ids_.end()};
  }

 private:
  void add(uint64_t id) {
    std::lock_guard lock(mutex_);
    ids_.insert(id);
  }
  void remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    ids_.erase(id);
  }
  mutable std::mutex mutex_;
  std::set<uint64_t> ids_;
};

class ServerState {
 public:
  explicit ServerState(ServerOptions options)
      : options_(std::move(options)),
        metrics_(MetricsOptions{.vllm_model_name = options_.vllm_metrics
                                                       ? std::optional<std::string>(options_.metrics_model_name)
                                                       : std::nullopt,
                                .log_requests = options_.log_requests}),
        admission_(options_.max_concurrent_requests, options_.max_queue_len),
        cache_(options_.response_cache_size),
        gpu_probe_(GpuProbe::open()) {}

  const ServerOptions& options() const { return options_; }
  ServerMetrics& metrics() { return metrics_; }
  Admission& admission() { return admission_; }
  ResponseCache& response_cache() { return cache_; }
  InFlightRequests& in_flight() { return in_flight_; }
  // Null without NVML or a GPU.
  GpuProbe* gpu_probe() { return gpu_probe_.get(); }

  // Null while the model loads.
  const ModelRuntime* runtime() const { return runtime_.load(std::memory_order_acquire); }
  void set_runtime(const ModelRuntime* runtime) { runtime_.store(runtime, std::memory_order_release); }

  // Set on SIGTERM: new requests get 503, /health fails.
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  void start_draining() { draining_.store(true, std::memory_order_release); }

 private:
  const ServerOptions options_;
  ServerMetrics metrics_;
  Admission admission_;
  ResponseCache cache_;
  InFlightRequests in_flight_;
  std::unique_ptr<GpuProbe> gpu_probe_;
  std::atomic<const ModelRuntime*> runtime_{nullptr};
  std::atomic<bool> draining_{false};
};

}  // namespace qinfer::server
