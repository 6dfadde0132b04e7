// POST /v1/chat/completions and /v1/completions: parse → prompt → response cache → admission → engine → JSON or SSE.

#include "server/api_error.h"
#include "server/completion_output.h"
#include "server/handlers.h"
#include "server/openai_response.h"
#include "server/output_constraint.h"
#include "server/sse_stream.h"
#include "util/logging.h"

namespace qinfer::server {
namespace {

void check_model_name(const std::optional<std::string>& requested, const ModelRuntime& runtime) {
  if (requested && *requested != runtime.served_model_name)
    throw ApiError(
        404, "invalid_request_error",
        "The model '" + *requested + "' does not exist; this server serves '" + runtime.served_model_name + "'",
        "model", "model_not_found");
}

std::vector<int32_t> build_prompt(const CompletionWork& work, const ModelRuntime& runtime) {
  std::vector<int32_t> prompt;
  try {
    if (work.kind == ApiKind::kChat)
      prompt = runtime.prompts->chat_prompt(work.chat);
    else
      prompt = work.prompt_text ? runtime.prompts->text_prompt(*work.prompt_text) : work.prompt_ids;
  } catch (const Error& e) {
    throw invalid_field(work.kind == ApiKind::kChat ? "messages" : "prompt", e.what());
  }
  const char* param = work.kind == ApiKind::kChat ? "messages" : "prompt";
  if (prompt.empty()) throw invalid_field(param, std::string(param) + " gives an empty prompt");
  if (static_cast<int64_t>(prompt.size()) >= runtime.max_model_len)
    throw invalid_field(param, "the prompt has " + std::to_string(prompt.size()) +
                                   " tokens but the model's context (max_model_len) is " +
                                   std::to_string(runtime.max_model_len) + " tokens, which leaves no room to generate");
  for (int32_t id : prompt)
    if (id >= runtime.vocab_size)
      throw invalid_field(param, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                     std::to_string(runtime.vocab_size) + ")");
  return prompt;
}

// The engine names a refused field as GenerationRequest spells it; the client sent the endpoint's own name for it: a
// chat's prompt is its messages, max_completion_tokens when given, a completion's top-logprob count is `logprobs`,
// and a constraint comes from response_format, guided_* or tools.
ApiError refused_by_engine(const Error& error, const CompletionWork& work, const nlohmann::ordered_json& body) {
  ApiError refused = api_error_from(error);
  if (refused.status() != 400 || error.field().empty()) return refused;
  const bool chat = work.kind == ApiKind::kChat;
  std::string param = error.field();
  if (param == "prompt" && chat)
    param = "messages";
  else if (param == "max_tokens" && chat && body.contains("max_completion_tokens") &&
           !body["max_completion_tokens"].is_null())
    param = "max_completion_tokens";
  else if (param == "top_logprobs" && !chat)
    param = "logprobs";
  else if (param == "constraint")
    param = constraint_param(work);
  return invalid_field(param, refused.what());
}

bool every_choice_completed(const nlohmann::json& response) {
  for (const auto& choice : response["choices"]) {
    const std::string& reason = choice["finish_reason"].get_ref<const std::string&>();
    if (reason != "stop" && reason != "length" && reason != "tool_calls") return false;
  }
  return true;
}

// How often a non-streamed request that waits for the engine checks whether its client closed the connection.
constexpr std::chrono::milliseconds kDisconnectPollInterval{100};

// Absorbs a non-streamed request's deltas until it is done. A client that disconnects meanwhile (the event loop
// watches its socket) gets its request aborted, which frees its KV blocks within one engine step; returns true then.
bool wait_for_completion(const HttpRequest& request, Engine& engine, const RequestHandle& handle,
                         CompletionOutput& output, ServerMetrics& metrics) {
  bool aborted = false;
  std::vector<StreamDelta> deltas;
  while (handle.stream->wait_drain(deltas, kDisconnectPollInterval)) {
    if (!aborted && request.client_closed()) {
      engine.abort(handle.id);
      metrics.client_disconnects.inc();
      spdlog::info("request {}: client went away while waiting, aborted", handle.id);
      aborted = true;
    }
    output.absorb(deltas);
    deltas.clear();
  }
  return aborted;
}

}  // namespace

void handle_generation(ApiKind kind, ServerState& state, const ModelRuntime& runtime, const HttpRequest& request,
                       HttpResponse& response) {
  const auto arrival = std::chrono::steady_clock::now();
  const nlohmann::ordered_json body = parse_json_body(request);
  auto work =
      std::make_shared<CompletionWork>(kind == ApiKind::kChat ? parse_chat_request(body, runtime.defaults)
                                                              : parse_completion_request(body, runtime.defaults));
  check_model_name(work->model, runtime);
  GenerationRequest generation = work->generation;
  generation.prompt = build_prompt(*work, runtime);
  if (kind == ApiKind::kChat && state.options().reasoning_parser == "qwen3") {
    work->parse_reasoning = true;
    // Whether the generation prompt opened <think> (Qwen3-4B-Thinking-2507's template does): the last of <think> and
    // </think> in the prompt is an opening one.
    const Tokenizer& tok = runtime.prompts->tokenizer();
    const std::optional<int32_t> open = tok.token_id("<think>"), close = tok.token_id("</think>");
    for (auto it = generation.prompt.rbegin(); it != generation.prompt.rend() && open && close; ++it) {
      if (*it == *close) break;
      if (*it == *open) {
        work->prompt_opens_reasoning = true;
        break;
      }
    }
  }
  for (const LogitBias& bias : generation.logit_bias)
    if (bias.token >= runtime.vocab_size)
      throw invalid_field("logit_bias", "logit_bias names token id " + std::to_string(bias.token) +
                                            ", outside the vocabulary [0, " + std::to_string(runtime.vocab_size) + ")");
  apply_output_constraint(*work, runtime.prompts->tokenizer(), *runtime.grammars, generation);

  const bool use_cache = state.options().response_cache_size > 0 && work->cacheable && !work->stream;
  if (use_cache) {
    if (std::optional<nlohmann::json> cached = state.response_cache().find(work->cache_key)) {
      state.metrics().response_cache_hits.inc();
      (*cached)["id"] = random_id(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-");
      (*cached)["created"] = unix_time_now();
      write_json(response, 200, *cached);
      return;
    }
    state.metrics().response_cache_misses.inc();
  }

  const auto deadline = arrival + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(state.options().request_timeout_seconds));
  Admission::Outcome admitted = state.admission().admit(deadline);
  if (admitted.refusal == Admission::Refusal::kClosed) {
    response.close_connection = true;
    throw ApiError(503, "service_unavailable", kShutdownRefusal);
  }
  if (!admitted.slot) {
    response.set_header("Retry-After", std::to_string(state.options().retry_after_seconds));
    throw ApiError(429, "rate_limit_exceeded",
                   admitted.refusal == Admission::Refusal::kQueueFull
                       ? "the server is at capacity (--max-concurrent-requests and --max-queue-len); retry later"
                       : "the request waited for a slot until its deadline (--request-timeout); retry later",
                   std::nullopt, "rate_limit_exceeded");
  }
  generation.deadline = deadline;
  // A stream's deltas wake the event loop: the engine thread notifies the request's wake-up after each push.
  std::shared_ptr<StreamWakeup> wakeup;
  if (work->stream) {
    wakeup = std::make_shared<StreamWakeup>();
    generation.on_output = [wakeup] { wakeup->notify(); };
  }

  RequestHandle handle;
  const auto submitted = std::chrono::steady_clock::now();
  try {
    handle = runtime.engine->submit(std::move(generation));
  } catch (const Error& e) {
    throw refused_by_engine(e, *work, body);
  }
  InFlightRequests::Entry in_flight(state.in_flight(), handle.id);
  const Tokenizer& tokenizer = runtime.prompts->tokenizer();
  auto output = std::make_unique<CompletionOutput>(
      *work, runtime.served_model_name, tokenizer, state.metrics(),
      CompletionOutput::Timing{arrival, admitted.queued_seconds, submitted, handle.stream});

  if (work->stream) {
    response.stream =
        std::make_shared<SseStream>(work, std::move(output), *runtime.engine, handle, std::move(*admitted.slot),
                                    std::move(in_flight), state.metrics(), std::move(wakeup));
    response.status = 200;
    response.content_type = "text/event-stream";
    response.set_header("Cache-Control", "no-cache");
    response.set_header("X-Accel-Buffering", "no");
    return;
  }

  const bool client_gone = wait_for_completion(request, *runtime.engine, handle, *output, state.metrics());
  const Usage usage = handle.stream->usage();
  output->record_finished(usage);
  // Written to nobody; 499 (nginx's "client closed request") keeps the status metrics honest.
  if (client_gone) throw ApiError(499, "client_closed_request", "the client closed the connection");
  if (output->failure()) throw *output->failure();
  nlohmann::json result = output->final_response(usage);
  if (use_cache && every_choice_completed(result)) state.response_cache().insert(work->cache_key, result);
  write_json(response, 200, result);
}

}  // namespace qinfer::server
