#include "engine/engine.h"

#include <algorithm>
#include <exception>

#include "engine/draft_verification.h"
#include "util/byte_size.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer {
namespace {

SchedulerOptions scheduler_options(const EngineOptions& options, int32_t max_model_len, const ModelConfig& config) {
  SchedulerOptions result;
  result.max_num_seqs = options.max_num_seqs;
  result.max_num_batched_tokens = options.max_num_batched_tokens;
  result.max_model_len = max_model_len;
  result.enable_chunked_prefill = options.enable_chunked_prefill;
  result.long_prefill_token_threshold = options.long_prefill_token_threshold;
  if (result.long_prefill_token_threshold == 0 && options.max_num_partial_prefills > 1)
    result.long_prefill_token_threshold = std::max<int32_t>(1, max_model_len / 25);
  result.max_num_partial_prefills = options.max_num_partial_prefills;
  result.max_long_partial_prefills = options.max_long_partial_prefills;
  if (options.enable_cost_based_chunking) result.prefill_attention_cost_ratio = prefill_attention_cost_ratio(config);
  result.target_step_ms = options.target_itl_ms;
  result.policy = options.policy;
  result.eos_token_ids = options.eos_token_ids.value_or(config.eos_token_ids);
  result.speculation = options.speculation;
  return result;
}

// The configured speculation, or none (with the one warning) when the backend cannot verify proposals.
EngineOptions with_supported_speculation(EngineOptions options, const Backend& backend) {
  if (options.speculation.enabled() && !backend.supports_multi_position_sampling()) {
    spdlog::warn(
        "speculative decoding ({}) is off: the {} backend cannot sample at several positions of a sequence "
        "in one step; every request decodes one token per step",
        speculative_method_name(options.speculation.method), backend.name());
    options.speculation = SpeculativeConfig{};
  }
  return options;
}

int32_t resolve_max_model_len(const EngineOptions& options, const Backend& backend) {
  int32_t backend_limit = backend.max_model_len();
  if (options.max_model_len < 0 || options.max_model_len > backend_limit)
    throw Error(ErrorKind::kInvalidArgument, "max_model_len must be in [1, " + std::to_string(backend_limit) +
                                                 "] (the backend's limit), got " +
                                                 std::to_string(options.max_model_len));
  return options.max_model_len == 0 ? backend_limit : options.max_model_len;
}

// A draft_model configuration's draft backend, checked against the target's; null for other methods.
std::unique_ptr<DraftModelProposer> make_draft_proposer(const EngineOptions& options, const Backend& target,
                                                        int32_t max_model_len, Backend* draft) {
  if (options.speculation.method != SpeculativeMethod::kDraftModel) return nullptr;
  if (draft == nullptr)
    throw Error(ErrorKind::kInvalidArgument, "speculative method draft_model needs the draft model's backend");
  const int32_t target_vocab = target.config().vocab_size, draft_vocab = draft->config().vocab_size;
  if (draft_vocab != target_vocab)
    throw Error(ErrorKind::kUnsupported, "the draft model's vocabulary has " + std::to_string(draft_vocab) +
                                             " tokens, the target's " + std::to_string(target_vocab) +
                                             ": a draft must share the target's tokenizer");
  const KvCacheShape target_kv = target.kv_cache(), draft_kv = draft->kv_cache();
  if (draft_kv.block_size != target_kv.block_size || draft_kv.num_blocks < target_kv.num_blocks)
    throw Error(ErrorKind::kInvalidArgument,
                "the draft model's KV cache (" + std::to_string(draft_kv.num_blocks) + " blocks of " +
                    std::to_string(draft_kv.block_size) + " tokens) must hold the target's block ids (" +
                    std::to_string(target_kv.num_blocks) + " blocks of " + std::to_string(target_kv.block_size) + ")");
  if (draft->max_model_len() < max_model_len)
    throw Error(ErrorKind::kInvalidArgument, "the draft model's context (" + std::to_string(draft->max_model_len()) +
                                                 " tokens) is shorter than max_model_len " +
                                                 std::to_string(max_model_len) + "; lower --max-model-len");
  return std::make_unique<DraftModelProposer>(*draft, options.max_num_seqs, options.max_num_batched_tokens);
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kDeadline:
      return "deadline";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

Engine::Engine(Backend& backend, EngineOptions options, Backend* draft)
    : backend_(backend),
      options_(with_supported_speculation(std::move(options), backend)),
      limits_{backend.config().vocab_size,
              resolve_max_model_len(options_, backend),
              backend.kv_cache().block_size,
              static_cast<int32_t>(backend.kv_cache().num_blocks),
              static_cast<bool>(options_.make_text_decoder),
              options_.max_logprobs,
              options_.max_prompt_tokens,
              options_.policy == SchedulingPolicy::kPriority},
      blocks_(limits_.num_blocks, limits_.block_size, options_.enable_prefix_caching),
      scheduler_(scheduler_options(options_, limits_.max_model_len, backend.config()), blocks_),
      draft_proposer_(make_draft_proposer(options_, backend, limits_.max_model_len, draft)),
      seed_source_(options_.seed ? *options_.seed : std::random_device{}()) {
  int64_t blocks_per_seq = blocks_.blocks_for_tokens(limits_.max_model_len);
  if (blocks_per_seq > limits_.num_blocks) {
    const KvCacheShape kv = backend.kv_cache();
    const int64_t block_bytes = kv.num_blocks > 0 ? kv.bytes / kv.num_blocks : 0;
    throw Error(ErrorKind::kInvalidArgument,
                "max_model_len " + std::to_string(limits_.max_model_len) + " needs " + std::to_string(blocks_per_seq) +
                    " KV blocks (" + format_bytes(blocks_per_seq * block_bytes) +
                    ") for one sequence but the cache has " + std::to_string(limits_.num_blocks) + " (" +
                    format_bytes(kv.bytes) +
                    "); lower --max-model-len or give the KV cache more memory (--kv-cache-memory-bytes; on a GPU "
                    "also --gpu-memory-utilization)");
  }
  if (options_.max_num_batched_tokens < options_.max_num_seqs)
    throw Error(ErrorKind::kInvalidArgument,
                "max_num_batched_tokens (" + std::to_string(options_.max_num_batched_tokens) +
                    ") must be at least max_num_seqs (" + std::to_string(options_.max_num_seqs) + ")");
  if (!options_.enable_chunked_prefill && options_.max_num_batched_tokens < limits_.max_model_len)
    throw Error(ErrorKind::kInvalidArgument,
                "without chunked prefill, max_num_batched_tokens (" + std::to_string(options_.max_num_batched_tokens) +
                    ") must be at least max_model_len (" + std::to_string(limits_.max_model_len) + ")");
  if (draft_proposer_)
    scheduler_.set_draft_proposer([this](std::span<const DraftRequest> requests) {
      try {
        draft_proposer_->propose(requests);
      } catch (const std::exception& e) {
        // The slots are reserved and hold whatever the draft left there: verified by the rule for deterministic
        // proposals (accepted while equal to the target's sample), so the output stays exact.
        spdlog::error("engine: the draft model failed, its proposals this step are void: {}", e.what());
        for (const DraftRequest& request : requests) request.seq->speculation.draft_distributions.clear();
      }
    });
  publish_stats();
}

Engine::~Engine() {
  stop();
  take_intake();
  for (auto& [id, request] : requests_) end_request(*request, FinishReason::kAbort, "");
}

RequestHandle Engine::submit(GenerationRequest request) {
  int32_t max_tokens = validate_request(request, limits_);
  auto state = std::make_unique<RequestState>();
  state->logprobs = request.logprobs;
  state->deadline = request.deadline;
  state->on_output = std::move(request.on_output);
  RequestHandle handle;
  std::lock_guard lock(intake_mutex_);
  state->id = handle.id = next_request_id_++;
  state->stream = handle.stream = std::make_shared<RequestStream>(handle.id);
  // The prompt's size is known now; the rest of the usage is set when the request ends.
  Usage submitted_usage;
  submitted_usage.prompt_tokens = static_cast<int32_t>(request.prompt.size());
  state->stream->set_usage(submitted_usage);
  uint64_t base_seed = request.seed ? *request.seed : seed_source_();
  for (int32_t i = 0; i < request.n; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->id = next_sequence_id_++;
    seq->request_id = handle.id;
    seq->sample_index = i;
    seq->priority = request.priority;
    seq->tokens = request.prompt;
    seq->num_prompt_tokens = static_cast<int32_t>(request.prompt.size());
    seq->sampling = request.sampling;
    seq->sampling.seed = base_seed + static_cast<uint64_t>(i);
    seq->penalty_tokens = PenaltyTokens(seq->sampling, request.prompt);
    seq->max_tokens = max_tokens;
    seq->ignore_eos = request.ignore_eos;
    seq->stop_token_ids = request.stop_token_ids;
    seq->deadline = request.deadline;
    if (request.constraint) {
      seq->matcher = std::make_unique<grammar::ScopedMatcher>(request.constraint, request.constraint_scope);
      seq->allowed_tokens.assign(static_cast<size_t>(request.constraint->vocab().mask_words()), 0u);
    }
    seq->logit_bias = request.logit_bias;
    if (i > 0) seq->fork_parent = state->samples[0].seq.get();
    SampleState sample;
    sample.seq = std::move(seq);
    if (options_.make_text_decoder) sample.decoder = options_.make_text_decoder();
    if (!request.stop.empty()) sample.stops.emplace(request.stop);
    state->samples.push_back(std::move(sample));
  }
  submitted_.push_back(std::move(state));
  intake_ready_.notify_one();
  return handle;
}

void Engine::abort(uint64_t request_id) {
  std::lock_guard lock(intake_mutex_);
  aborted_.push_back(request_id);
  intake_ready_.notify_one();
}

void Engine::refuse_unscheduled(std::string reason) {
  std::lock_guard lock(intake_mutex_);
  unscheduled_refusal_ = std::move(reason);
  intake_ready_.notify_one();
}

void Engine::start() {
  QINFER_CHECK(!thread_.joinable(), "engine already started");
  {
    std::lock_guard lock(intake_mutex_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(intake_mutex_);
    stopping_ = true;
  }
  intake_ready_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock lock(intake_mutex_);
      intake_ready_.wait(lock, [&] { return stopping_ || !submitted_.empty() || !aborted_.empty() || has_work(); });
      if (stopping_) return;
    }
    if (!step() && has_work()) {
      // Work exists but none could be scheduled (cannot happen for validated requests); do not spin.
      std::unique_lock lock(intake_mutex_);
      intake_ready_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
}

bool Engine::has_work() const { return scheduler_.has_work(); }

bool Engine::step() {
  const Clock::time_point step_start = now();
  take_intake();
  expire_deadlines();
  bool ran = false;
  batch_sequences_ = 0;
  if (scheduler_.has_work()) {
    Batch& batch = scheduler_.schedule();
    batch.prepare_constraints = constraint_preparer(batch);
    if (!batch.sequences.empty()) {
      ran = true;
      batch_sequences_ = static_cast<int32_t>(batch.sequences.size());
      mark_scheduled();
      updates_.clear();
      try {
        const Clock::time_point backend_start = now();
        std::vector<SampleResult> results = run_backend(batch);
        const double backend_seconds = std::chrono::duration<double>(now() - backend_start).count();
        backend_seconds_ += backend_seconds;
        scheduler_.record_step_time(backend_seconds);
        scheduler_.postprocess(results, updates_);
      } catch (const std::exception& e) {
        spdlog::error("engine: batch of {} sequences failed: {}", batch.sequences.size(), e.what());
        fail_batch(e.what());
        updates_.clear();
      }
      for (const SequenceUpdate& update : updates_) emit(update);
    }
  }
  release_completed();
  if (ran) step_seconds_ += std::chrono::duration<double>(now() - step_start).count();
  publish_stats();
  return ran;
}

std::vector<SampleResult> Engine::run_backend(const Batch& batch) {
  if (!draft_proposer_) return backend_.step(batch);
  const std::vector<Sequence*> sequences = scheduler_.last_batch_sequences();
  std::vector<const SpeculationState*> states(sequences.size(), nullptr);
  bool rejection_sampling = false;
  for (size_t i = 0; i < sequences.size(); ++i)
    if (!sequences[i]->speculation.draft_distributions.empty() && batch.sequences[i].sample_all_positions) {
      states[i] = &sequences[i]->speculation;
      rejection_sampling = true;
    }
  // Greedy proposals are judged by the ordinary rule (proposal == the target's argmax): the device samples.
  if (!rejection_sampling) return backend_.step(batch);
  std::vector<float> logits = backend_.forward_logits(batch);
  if (batch.prepare_constraints) batch.prepare_constraints();
  std::vector<SampleResult> results =
      sample_verified_batch_on_host(batch, logits, backend_.config().vocab_size, states);
  for (Sequence* seq : sequences) seq->speculation.draft_distributions.clear();  // a vocabulary's worth each
  return results;
}

std::function<void()> Engine::constraint_preparer(const Batch& batch) {
  std::vector<Sequence*> constrained;
  const std::vector<Sequence*> sequences = scheduler_.last_batch_sequences();
  for (size_t i = 0; i < sequences.size(); ++i)
    if (batch.sequences[i].sample && sequences[i]->matcher) constrained.push_back(sequences[i]);
  if (constrained.empty()) return {};
  // Runs inside Backend::step() while the device computes the forward.
  return [constrained = std::move(constrained)] {
    for (Sequence* seq : constrained) seq->matcher->fill_mask(seq->allowed_tokens);
  };
}

void Engine::take_intake() {
  std::vector<std::unique_ptr<RequestState>> submitted;
  std::vector<uint64_t> aborted;
  std::optional<std::string> refusal;
  {
    std::lock_guard lock(intake_mutex_);
    submitted.swap(submitted_);
    aborted.swap(aborted_);
    refusal = unscheduled_refusal_;
  }
  for (auto& request : submitted) {
    for (SampleState& sample : request->samples) scheduler_.add(sample.seq.get());
    uint64_t id = request->id;
    requests_.emplace(id, std::move(request));
  }
  for (uint64_t id : aborted) {
    auto it = requests_.find(id);
    if (it != requests_.end()) end_request(*it->second, FinishReason::kAbort, "");
  }
  if (refusal) end_unscheduled(*refusal);
}

void Engine::end_unscheduled(const std::string& reason) {
  for (auto& [id, request] : requests_)
    if (!request->scheduled && request->num_finished < static_cast<int32_t>(request->samples.size()))
      end_request(*request, FinishReason::kAbort, reason);
}

void Engine::expire_deadlines() {
  const Clock::time_point time = now();
  for (auto& [id, request] : requests_)
    if (request->deadline && time >= *request->deadline &&
        request->num_finished < static_cast<int32_t>(request->samples.size()))
      end_request(*request, FinishReason::kDeadline, "");
}

void Engine::emit(const SequenceUpdate& update) {
  RequestState& request = *requests_.at(update.seq->request_id);
  SampleState& sample = request.samples[static_cast<size_t>(update.seq->sample_index)];
  StreamDelta delta;
  delta.index = update.seq->sample_index;
  delta.token_ids.push_back(update.token);
  if (request.logprobs) delta.logprobs.push_back({update.token, update.logprob, update.top});
  FinishReason finish = update.finish_reason;
  // A step may produce several tokens of a sequence (speculative decoding); once one of them ended it here (a stop
  // string, an error), the rest are dropped from its output as if never generated.
  if (sample.finish_sent) return;
  auto end_here = [&](FinishReason reason) {
    scheduler_.finish(update.seq, reason);
    update.seq->finish_reason = reason;
    update.seq->tokens.resize(static_cast<size_t>(update.seq->num_prompt_tokens + update.output_index + 1));
    finish = reason;
  };
  if (update.seq->matcher && !update.seq->matcher->accept_token(update.token) && finish == FinishReason::kNone) {
    // Cannot happen while the backend honours the mask; never let such output pass as complete.
    end_here(FinishReason::kError);
    delta.error = "the sampled token " + std::to_string(update.token) + " breaks the request's constraint";
  }
  if (sample.decoder) {
    try {
      std::string text = sample.decoder->push(update.token);
      if (finish != FinishReason::kNone) text += sample.decoder->flush();
      if (sample.stops) {
        StopStringMatcher::Result matched = sample.stops->push(text);
        text = std::move(matched.text);
        if (matched.stopped && finish == FinishReason::kNone) {
          end_here(FinishReason::kStop);
        } else if (!matched.stopped && finish != FinishReason::kNone) {
          text += sample.stops->flush();
        }
      }
      delta.text = std::move(text);
    } catch (const std::exception& e) {
      end_here(FinishReason::kError);
      delta.error = std::string("detokenizer failed: ") + e.what();
    }
  }
  delta.finish_reason = finish;
  if (finish != FinishReason::kNone) {
    sample.finish_sent = true;
    ++request.num_finished;
  }
  send(request, std::move(delta));
}

void Engine::end_request(RequestState& request, FinishReason reason, const std::string& error) {
  for (SampleState& sample : request.samples) {
    if (sample.finish_sent) continue;
    scheduler_.finish(sample.seq.get(), reason);
    sample.finish_sent = true;
    ++request.num_finished;
    StreamDelta delta;
    delta.index = sample.seq->sample_index;
    delta.finish_reason = reason;
    delta.error = error;
    send(request, std::move(delta));
  }
}

void Engine::send(RequestState& request, StreamDelta delta) {
  bool complete = request.num_finished == static_cast<int32_t>(request.samples.size());
  if (complete) {
    Usage usage;
    usage.prompt_tokens = request.samples[0].seq->num_prompt_tokens;
    for (const SampleState& sample : request.samples) usage.completion_tokens += sample.seq->num_output_tokens();
    usage.cached_tokens = request.samples[0].seq->num_cached_prompt_tokens;
    request.stream->set_usage(usage);
  }
  request.stream->push(std::move(delta));
  if (complete) {
    request.stream->close();
    completed_.push_back(request.id);
  }
  if (!request.on_output) return;
  try {
    request.on_output();
  } catch (const std::exception& e) {
    // A misbehaving callback must not take the loop down for everyone else.
    spdlog::error("engine: on_output callback of request {} threw: {}", request.id, e.what());
  }
}

void Engine::mark_scheduled() {
  const Clock::time_point time = now();
  for (Sequence* seq : scheduler_.last_batch_sequences()) {
    if (seq->num_output_tokens() > 0 || seq->num_preemptions > 0) continue;  // not its first scheduling
    auto it = requests_.find(seq->request_id);
    if (it == requests_.end()) continue;
    it->second->scheduled = true;
    it->second->stream->mark_scheduled(time);
  }
}

void Engine::fail_batch(const std::string& error) {
  for (Sequence* seq : scheduler_.last_batch_sequences()) {
    auto it = requests_.find(seq->request_id);
    if (it != requests_.end()) end_request(*it->second, FinishReason::kError, "backend failed: " + error);
  }
}

void Engine::release_completed() {
  for (uint64_t id : completed_) finished_requests_ += requests_.erase(id);
  completed_.clear();
}

void Engine::publish_stats() {
  EngineStats stats;
  stats.scheduler = scheduler_.stats();
  stats.blocks = blocks_.stats();
  stats.num_running = scheduler_.num_running();
  stats.num_waiting = scheduler_.num_waiting();
  stats.num_free_blocks = blocks_.num_free_blocks();
  stats.num_blocks = blocks_.num_blocks();
  stats.batch_sequences = batch_sequences_;
  stats.finished_requests = finished_requests_;
  stats.step_seconds = step_seconds_;
  stats.backend_seconds = backend_seconds_;
  stats.memory = backend_.memory_plan();
  stats.speculation_active = options_.speculation.enabled();
  if (draft_proposer_) stats.draft = draft_proposer_->stats();
  stats.backend_failure = backend_.failure();
  std::lock_guard lock(stats_mutex_);
  stats_ = stats;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

}  // namespace qinfer
