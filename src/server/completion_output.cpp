#include "server/completion_output.h"

#include <algorithm>

#include "server/openai_response.h"

namespace qinfer::server {
namespace {

bool is_blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

double seconds_between(CompletionOutput::TimePoint from, CompletionOutput::TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

CompletionOutput::CompletionOutput(const CompletionWork& work, std::string model, const Tokenizer& tokenizer,
                                   ServerMetrics& metrics, Timing timing)
    : work_(work),
      id_(random_id(work.kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-")),
      created_(unix_time_now()),
      model_(std::move(model)),
      tokenizer_(tokenizer),
      metrics_(metrics),
      timing_(timing),
      choices_(static_cast<size_t>(work.generation.n)) {
  if (work_.parse_reasoning)
    for (Choice& choice : choices_) choice.reasoning.emplace(work_.prompt_opens_reasoning);
}

ToolCallParser::Output CompletionOutput::apply(const StreamDelta& delta, Choice& choice, std::string& reasoning) {
  tokens_seen_ += static_cast<int32_t>(delta.token_ids.size());
  const TimePoint now = std::chrono::steady_clock::now();
  if (!first_delta_seen_) {
    // Queue time = the wait for a server slot + the engine's queue, which ends when the engine first schedules the
    // request (its first output when the stream has no such time).
    const std::optional<TimePoint> first_scheduled =
        timing_.engine_stream ? timing_.engine_stream->first_scheduled() : std::nullopt;
    const TimePoint scheduled = first_scheduled.value_or(now);
    queue_seconds_ = timing_.slot_wait_seconds + seconds_between(timing_.submitted, scheduled);
    metrics_.request_queue_time.observe(*queue_seconds_);
    first_delta_seen_ = true;
  }
  if (!delta.token_ids.empty()) {
    if (!first_token_seen_) {
      ttft_seconds_ = seconds_between(timing_.arrival, now);
      metrics_.time_to_first_token.observe(*ttft_seconds_);
    }
    if (choice.last_output) metrics_.inter_token_latency.observe(seconds_between(*choice.last_output, now));
    first_token_seen_ = true;
    choice.last_output = now;
  }
  if (delta.finish_reason == FinishReason::kError && !failure_)
    failure_ = ApiError(500, "internal_error", "generation failed: " + delta.error);
  if (delta.finish_reason == FinishReason::kDeadline && !failure_)
    failure_ = ApiError(504, "timeout_error", "the request ran past its deadline (--request-timeout)");
  if (delta.finish_reason == FinishReason::kAbort && !failure_)
    failure_ =
        ApiError(503, "service_unavailable",
                 delta.error.empty() ? "the request was aborted before it finished (server shutdown)" : delta.error);

  // Reasoning first: tool calls and content are what follows it.
  std::string text = delta.text;
  reasoning.clear();
  if (choice.reasoning) {
    ReasoningParser::Output split = choice.reasoning->push(text);
    if (delta.finish_reason != FinishReason::kNone) {
      ReasoningParser::Output rest = choice.reasoning->flush();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    reasoning = std::move(split.reasoning);
    text = std::move(split.content);
  }
  ToolCallParser::Output out;
  if (work_.parse_tool_calls) {
    out = choice.parser.push(text);
    if (delta.finish_reason != FinishReason::kNone) {
      ToolCallParser::Output rest = choice.parser.finish();
      out.content += rest.content;
      out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
    }
  } else {
    out.content = std::move(text);
  }
  choice.calls.insert(choice.calls.end(), out.calls.begin(), out.calls.end());
  if (delta.finish_reason != FinishReason::kNone) {
    choice.finish_reason = openai_finish_reason(delta.finish_reason, !choice.calls.empty());
    choice.metric_reason =
        choice.finish_reason.empty() ? finish_reason_name(delta.finish_reason) : choice.finish_reason;
  }
  return out;
}

nlohmann::json CompletionOutput::chunk(nlohmann::json choices) const {
  nlohmann::json chunk = {{"id", id_},
                          {"object", work_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
                          {"created", created_},
                          {"model", model_},
                          {"choices", std::move(choices)}};
  if (work_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

nlohmann::json CompletionOutput::content_item(int32_t index, const std::string& content) const {
  nlohmann::json item = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (work_.kind == ApiKind::kChat)
    item["delta"] = {{"content", content}};
  else
    item["text"] = content;
  return item;
}

std::string CompletionOutput::content_event(Choice& choice, int32_t index, const std::string& content) {
  constexpr std::string_view kMarker = "qinfer-content-marker";
  if (choice.content_event_before.empty()) {
    const std::string event = sse_event(chunk(nlohmann::json::array({content_item(index, std::string(kMarker))})));
    // The first quoted marker: "choices" sorts before every other key of the chunk.
    const size_t at = event.find('"' + std::string(kMarker) + '"');
    choice.content_event_before = event.substr(0, at);
    choice.content_event_after = event.substr(at + kMarker.size() + 2);
  }
  std::string event = choice.content_event_before;
  event += dump_json(content);  // the JSON string, escaped as the DOM path escapes it
  event += choice.content_event_after;
  return event;
}

std::string CompletionOutput::stream_events(std::vector<StreamDelta>& deltas) {
  std::string events;
  const bool chat = work_.kind == ApiKind::kChat;
  for (size_t index = 0; chat && index < choices_.size(); ++index) {
    if (choices_[index].role_sent) continue;
    choices_[index].role_sent = true;
    events += sse_event(chunk(nlohmann::json::array({{{"index", index},
                                                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                      {"logprobs", nullptr},
                                                      {"finish_reason", nullptr}}})));
  }
  for (const StreamDelta& delta : deltas) {
    Choice& choice = choices_.at(static_cast<size_t>(delta.index));
    const size_t calls_before = choice.calls.size();
    std::string reasoning;
    ToolCallParser::Output out = apply(delta, choice, reasoning);
    // An ending without an OpenAI value (abort, deadline, error) gets no finish chunk: the error event follows.
    const bool finished = delta.finish_reason != FinishReason::kNone && !choice.finish_reason.empty();
    const bool with_logprobs = work_.generation.logprobs && !delta.logprobs.empty();
    if (out.content.empty() && out.calls.empty() && reasoning.empty() && !finished && !with_logprobs) continue;
    if (out.calls.empty() && reasoning.empty() && !finished && !with_logprobs) {
      events += content_event(choice, delta.index, out.content);  // most tokens: no JSON DOM
      choice.text_bytes += out.content.size();
      continue;
    }
    nlohmann::json item = content_item(delta.index, out.content);
    if (chat) {
      nlohmann::json& message = item["delta"];
      if (out.content.empty() && !out.calls.empty()) message.erase("content");
      if (!out.calls.empty()) message["tool_calls"] = tool_calls_json(out.calls, true, calls_before);
      if (finished && out.content.empty() && out.calls.empty()) message = nlohmann::json::object();
      if (!reasoning.empty()) {
        if (out.content.empty()) message.erase("content");
        message["reasoning_content"] = reasoning;
      }
      if (with_logprobs) item["logprobs"] = chat_logprobs_json(delta.logprobs, tokenizer_);
    } else if (with_logprobs) {
      item["logprobs"] = completion_logprobs_json(delta.logprobs, tokenizer_, choice.text_bytes);
    }
    choice.text_bytes += out.content.size();
    if (finished) item["finish_reason"] = choice.finish_reason;
    events += sse_event(chunk(nlohmann::json::array({std::move(item)})));
  }
  return events;
}

std::string CompletionOutput::stream_end(const Usage& usage) {
  std::string events;
  if (work_.include_usage) {
    nlohmann::json last = chunk(nlohmann::json::array());
    last["usage"] = usage_json(usage);
    events += sse_event(last);
  }
  events += kSseDone;
  return events;
}

void CompletionOutput::absorb(std::vector<StreamDelta>& deltas) {
  for (StreamDelta& delta : deltas) {
    Choice& choice = choices_.at(static_cast<size_t>(delta.index));
    std::string reasoning;
    ToolCallParser::Output out = apply(delta, choice, reasoning);
    choice.text += out.content;
    choice.reasoning_text += reasoning;
    for (TokenLogprobs& entry : delta.logprobs) choice.logprobs.push_back(std::move(entry));
  }
}

nlohmann::json CompletionOutput::final_response(const Usage& usage) {
  const bool chat = work_.kind == ApiKind::kChat;
  nlohmann::json choices = nlohmann::json::array();
  for (size_t index = 0; index < choices_.size(); ++index) {
    Choice& choice = choices_[index];
    nlohmann::json item = {{"index", index}};
    nlohmann::json logprobs = nullptr;
    if (work_.generation.logprobs)
      logprobs = chat ? chat_logprobs_json(choice.logprobs, tokenizer_)
                      : completion_logprobs_json(choice.logprobs, tokenizer_, 0);
    if (chat) {
      nlohmann::json message = {{"role", "assistant"}, {"content", choice.text}};
      if (!choice.calls.empty()) {
        if (is_blank(choice.text)) message["content"] = nullptr;
        message["tool_calls"] = tool_calls_json(choice.calls, false, 0);
      }
      if (choice.reasoning)
        message["reasoning_content"] =
            choice.reasoning_text.empty() ? nlohmann::json(nullptr) : nlohmann::json(choice.reasoning_text);
      item["message"] = std::move(message);
    } else {
      item["text"] = choice.text;
    }
    item["logprobs"] = std::move(logprobs);
    item["finish_reason"] = choice.finish_reason;
    choices.push_back(std::move(item));
  }
  return {{"id", id_},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", std::move(choices)},
          {"usage", usage_json(usage)}};
}

void CompletionOutput::record_finished(const Usage& usage) {
  FinishedRequest request;
  request.engine_id = timing_.engine_stream ? timing_.engine_stream->request_id() : 0;
  request.id = id_;
  request.prompt_tokens = usage.prompt_tokens;
  request.cached_tokens = usage.cached_tokens;
  request.output_tokens = usage.completion_tokens;
  request.queue_seconds = queue_seconds_;
  request.ttft_seconds = ttft_seconds_;
  request.duration_seconds = seconds_between(timing_.arrival, std::chrono::steady_clock::now());
  for (const Choice& choice : choices_)
    request.finish_reasons.push_back(choice.metric_reason.empty() ? "abort" : choice.metric_reason);
  metrics_.record_finished(request);
}

void CompletionOutput::record_abandoned(RequestStream& stream) {
  // Runs on the connection's event loop, which must not wait for the engine: the deltas queued so far are taken
  // without waiting, the choices the abort ends count as "abort", and until the engine's final usage exists the
  // output counted is the tokens seen (the prompt's size is known from submission).
  std::vector<StreamDelta> deltas;
  stream.wait_drain(deltas, std::chrono::milliseconds(0));
  absorb(deltas);
  Usage usage = stream.usage();
  usage.completion_tokens = std::max(usage.completion_tokens, tokens_seen_);
  record_finished(usage);
}

}  // namespace qinfer::server
