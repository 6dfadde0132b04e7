// The engine: requests in, streamed tokens out. One step = scheduler.schedule() -> backend.step(batch) ->
// scheduler.postprocess() -> per-sample output processing (text, stop strings, logprobs) -> request streams.
//
// Threading: submit(), abort() and stats() are thread-safe and never wait for a step. The loop runs on the engine's
// own thread after start(); tests and offline tools may instead call step() themselves (never both). Streams are
// filled by the engine thread and read by any thread (RequestStream).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "engine/block_manager.h"
#include "engine/draft_model_proposer.h"
#include "engine/request.h"
#include "engine/request_validation.h"
#include "engine/scheduler.h"
#include "engine/stop_strings.h"
#include "engine/text_decoder.h"

namespace qinfer {

struct EngineOptions {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  int32_t max_model_len = 0;  // 0: the backend's
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  // Partial-prefill limits (SchedulerOptions). A threshold of 0 with max_num_partial_prefills > 1 becomes 4 % of
  // max_model_len, as in vLLM.
  int32_t long_prefill_token_threshold = 0;
  int32_t max_num_partial_prefills = 0;
  int32_t max_long_partial_prefills = 0;
  // Chunked prefill: cut a chunk after a long cached context by its estimated attention cost, with the ratio derived
  // from the model (prefill_cost.h, docs/ENGINE.md). Off: by token count alone.
  bool enable_cost_based_chunking = true;
  // Latency-targeted chunking (SchedulerOptions::target_step_ms; docs/ENGINE.md): in a step beside decodes, prompt
  // chunks are sized so the step's predicted time stays within this many milliseconds. 0: off. `qinfer serve`
  // defaults to 50 (--target-itl-ms).
  double target_itl_ms = 0;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  int32_t max_logprobs = -1;      // top logprobs a request may ask for per token (-1: any the API allows)
  int32_t max_prompt_tokens = 0;  // longest prompt accepted (0: max_model_len - 1)
  std::optional<uint64_t> seed;   // seeds the random seeds of requests without one (absent: nondeterministic)
  std::optional<std::vector<int32_t>> eos_token_ids;  // absent: the model's
  TextDecoderFactory make_text_decoder;               // absent: token ids only
  // --speculative-config. On a backend without multi-position sampling the engine runs without it and says so once.
  SpeculativeConfig speculation;
  // The engine's time source (step timing, which calibrates latency-targeted chunking; deadlines; first-scheduled
  // times). Absent: Clock::now. Tests inject a clock that a fake backend advances by a known cost model.
  std::function<Clock::time_point()> clock;
};

struct RequestHandle {
  uint64_t id = 0;
  std::shared_ptr<RequestStream> stream;
};

struct EngineStats {
  SchedulerStats scheduler;
  BlockManagerStats blocks;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_free_blocks = 0;
  int32_t num_blocks = 0;
  int32_t batch_sequences = 0;  // sequences in the last step's batch (0 when the last step ran none)
  uint64_t finished_requests = 0;
  // Wall time of the steps that ran a batch, and the part of it inside Backend::step(); the difference is the
  // engine's host overhead (scheduling, postprocess, streaming), during which a synchronous backend's GPU is idle.
  double step_seconds = 0;
  double backend_seconds = 0;
  MemoryPlan memory;                // the backend's, fixed once it is loaded
  bool speculation_active = false;  // speculative decoding configured and supported by the backend
  DraftStats draft;                 // draft-model speculation: the draft's steps and their wall time
  std::string backend_failure;      // Backend::failure(): non-empty once the backend can no longer run steps
};

class Engine {
 public:
  // `backend` must outlive the engine. Throws Error(kInvalidArgument) for limits that cannot work together.
  // `draft`: the draft model's backend, required by (and only used with) the draft_model speculative method; it must
  // outlive the engine, have the target's vocabulary (else kUnsupported) and block size, at least its KV blocks and
  // its context (else kInvalidArgument).
  Engine(Backend& backend, EngineOptions options, Backend* draft = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request; throws Error(kInvalidArgument) with a message naming the field.
  RequestHandle submit(GenerationRequest request);
  // Ends the request within one step: its blocks are freed and its stream gets finish reason "abort".
  // Unknown or finished ids are ignored.
  void abort(uint64_t request_id);
  // For draining: from the next step on, every request none of whose sequences has been in a batch yet — those queued
  // now and any submitted later — ends at once with finish reason "abort" and `reason` as its error, instead of
  // waiting for a seat; requests already running go on. Cannot be undone.
  void refuse_unscheduled(std::string reason);

  void start();  // runs the loop on the engine thread
  void stop();   // stops and joins the loop thread; requests stay queued (the destructor aborts what is left)

  // One iteration without the thread: takes queued submits/aborts, runs one batch. False when nothing ran.
  bool step();
  bool has_work() const;  // engine thread (or the step() caller) only

  EngineStats stats() const;
  int32_t max_model_len() const { return limits_.max_model_len; }
  const BlockManager& block_manager() const { return blocks_; }  // engine thread only

 private:
  struct SampleState {
    std::unique_ptr<Sequence> seq;
    std::unique_ptr<TextDecoder> decoder;
    std::optional<StopStringMatcher> stops;
    bool finish_sent = false;
  };
  struct RequestState {
    uint64_t id = 0;
    std::shared_ptr<RequestStream> stream;
    std::vector<SampleState> samples;
    bool logprobs = false;
    std::optional<Clock::time_point> deadline;
    std::function<void()> on_output;
    int32_t num_finished = 0;
    bool scheduled = false;  // one of its sequences has been in a batch
  };

  void loop();
  void take_intake();
  void expire_deadlines();
  void end_unscheduled(const std::string& reason);
  void emit(const SequenceUpdate& update);
  // The backend's results for the batch; a verify step of sampled draft-model proposals is scored with
  // forward_logits and judged on the host by rejection sampling (draft_verification.h).
  std::vector<SampleResult> run_backend(const Batch& batch);
  // The batch's prepare_constraints: the masks of its constrained sampling sequences (empty when there are none).
  std::function<void()> constraint_preparer(const Batch& batch);
  void end_request(RequestState& request, FinishReason reason, const std::string& error);
  void send(RequestState& request, StreamDelta delta);
  void fail_batch(const std::string& error);
  void mark_scheduled();  // the first-scheduled time of requests in the batch just scheduled
  void release_completed();
  void publish_stats();
  Clock::time_point now() const { return options_.clock ? options_.clock() : Clock::now(); }

  Backend& backend_;
  EngineOptions options_;
  RequestLimits limits_;
  BlockManager blocks_;
  Scheduler scheduler_;
  std::unique_ptr<DraftModelProposer> draft_proposer_;  // draft_model speculation only

  // Engine-thread state.
  std::unordered_map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::vector<uint64_t> completed_;
  std::vector<SequenceUpdate> updates_;
  uint64_t finished_requests_ = 0;
  double step_seconds_ = 0;
  double backend_seconds_ = 0;
  int32_t batch_sequences_ = 0;

  // Shared with submitting threads.
  std::mutex intake_mutex_;
  std::condition_variable intake_ready_;
  std::vector<std::unique_ptr<RequestState>> submitted_;
  std::vector<uint64_t> aborted_;
  std::optional<std::string> unscheduled_refusal_;  // refuse_unscheduled()'s reason
  uint64_t next_request_id_ = 1;
  uint64_t next_sequence_id_ = 1;
  std::mt19937_64 seed_source_;
  bool stopping_ = false;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;

  std::thread thread_;
};

}  // namespace qinfer
