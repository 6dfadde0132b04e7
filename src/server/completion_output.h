// Turns one request's engine deltas into OpenAI output: SSE chunks while streaming, or the final response object.
// Owns the per-choice state (text, tool-call parser, logprobs, finish reason) and records latency metrics.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/reasoning_parser.h"
#include "server/server_metrics.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace qinfer::server {

class CompletionOutput {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Timing {
    TimePoint arrival;                                   // the HTTP request came in
    double slot_wait_seconds = 0;                        // waited for a server slot (admission)
    TimePoint submitted;                                 // handed to the engine
    std::shared_ptr<const RequestStream> engine_stream;  // its first-scheduled time ends the queue time
  };
  // `model` is the served model name echoed in responses.
  CompletionOutput(const CompletionWork& work, std::string model, const Tokenizer& tokenizer, ServerMetrics& metrics,
                   Timing timing);

  // Streaming: the SSE events for these deltas (the first call also sends each choice's role chunk).
  std::string stream_events(std::vector<StreamDelta>& deltas);
  // Streaming: the usage chunk when asked for, then [DONE].
  std::string stream_end(const Usage& usage);

  // Non-streaming: records deltas; final_response() once the stream is done.
  void absorb(std::vector<StreamDelta>& deltas);
  nlohmann::json final_response(const Usage& usage);

  // Set when a choice ended with an error or the deadline: the request failed.
  const std::optional<ApiError>& failure() const { return failure_; }
  // Records end-of-request metrics (tokens, e2e latency, finish reasons) and the request's log line; call once.
  void record_finished(const Usage& usage);
  // A stream whose client went away (its request already aborted): takes the deltas queued so far, without waiting,
  // and records it like any finished request (finished_reason "abort").
  void record_abandoned(RequestStream& stream);

 private:
  struct Choice {
    std::string text;  // content so far (non-streaming), tool-call text removed
    std::vector<ParsedToolCall> calls;
    std::vector<TokenLogprobs> logprobs;
    ToolCallParser parser;
    std::optional<ReasoningParser> reasoning;  // --reasoning-parser: splits <think>...</think> off first
    std::string reasoning_text;                // reasoning so far (non-streaming)
    size_t text_bytes = 0;                     // bytes of text already produced (completion logprobs' text_offset)
    std::string finish_reason;                 // OpenAI's value; empty while running and for endings reported as errors
    std::string metric_reason;  // the finished_reason metric label: finish_reason, or abort, deadline, error
    std::optional<TimePoint> last_output;
    bool role_sent = false;
    // The SSE event of a content-only delta around its content string, rendered once (content_event).
    std::string content_event_before;
    std::string content_event_after;
  };
  // Applies one delta to its choice; returns the content released by it and the tool calls it completed, and sets
  // `reasoning` to the reasoning text it released.
  ToolCallParser::Output apply(const StreamDelta& delta, Choice& choice, std::string& reasoning);
  nlohmann::json chunk(nlohmann::json choices) const;
  // A streamed choice item that carries only `content` (chat: delta.content; completions: text).
  nlohmann::json content_item(int32_t index, const std::string& content) const;
  // The SSE event of a content-only delta: byte for byte what sse_event(chunk({content_item(...)})) writes, from text
  // rendered once per choice plus the escaped content, so most tokens build no JSON DOM.
  std::string content_event(Choice& choice, int32_t index, const std::string& content);

  const CompletionWork& work_;
  const std::string id_;
  const int64_t created_;
  const std::string model_;
  const Tokenizer& tokenizer_;
  ServerMetrics& metrics_;
  const Timing timing_;
  std::vector<Choice> choices_;
  bool first_delta_seen_ = false;
  bool first_token_seen_ = false;
  std::optional<double> queue_seconds_;  // set by the first delta
  std::optional<double> ttft_seconds_;   // set by the first token
  int32_t tokens_seen_ = 0;              // generated tokens of every choice taken from the engine so far
  std::optional<ApiError> failure_;
};

}  // namespace qinfer::server
