// Handlers that do not generate: /v1/models, /tokenize, /detokenize, /health, /metrics; and the JSON body helpers.

#include "server/api_error.h"
#include "server/handlers.h"
#include "server/openai_response.h"

namespace qinfer::server {
namespace {

// Deeper nesting than any OpenAI request needs; bounding it keeps recursive JSON code (dump, templates) safe.
constexpr int kMaxJsonDepth = 64;

nlohmann::json model_card(const ModelRuntime& runtime) {
  return {{"id", runtime.served_model_name},
          {"object", "model"},
          {"created", runtime.created},
          {"owned_by", "qinfer"},
          {"root", runtime.served_model_name},
          {"parent", nullptr},
          {"max_model_len", runtime.max_model_len}};
}

}  // namespace

nlohmann::ordered_json parse_json_body(const HttpRequest& request) {
  auto limit_depth = [](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
    if (depth > kMaxJsonDepth)
      throw ApiError(400, "invalid_request_error",
                     "the JSON body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  };
  try {
    return nlohmann::ordered_json::parse(request.body, limit_depth);
  } catch (const nlohmann::json::exception& e) {
    throw ApiError(400, "invalid_request_error", std::string("the request body is not valid JSON: ") + e.what());
  }
}

void write_json(HttpResponse& response, int status, const nlohmann::json& body) {
  response.status = status;
  response.set_content(dump_json(body), "application/json");
}

void handle_models(ServerState&, const ModelRuntime& runtime, const HttpRequest& request, HttpResponse& response) {
  if (request.matches.size() > 1) {
    const std::string id = request.matches[1];
    if (id != runtime.served_model_name)
      throw ApiError(404, "invalid_request_error", "The model '" + id + "' does not exist", "model", "model_not_found");
    write_json(response, 200, model_card(runtime));
    return;
  }
  write_json(response, 200, {{"object", "list"}, {"data", nlohmann::json::array({model_card(runtime)})}});
}

void handle_tokenize(ServerState&, const ModelRuntime& runtime, const HttpRequest& request, HttpResponse& response) {
  TokenizeWork work = parse_tokenize_request(parse_json_body(request));
  std::vector<int32_t> tokens;
  try {
    tokens = work.prompt ? runtime.prompts->text_prompt(*work.prompt) : runtime.prompts->chat_prompt(work.chat);
  } catch (const Error& e) {
    throw invalid_field(work.prompt ? "prompt" : "messages", e.what());
  }
  write_json(response, 200, {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", runtime.max_model_len}});
}

void handle_detokenize(ServerState&, const ModelRuntime& runtime, const HttpRequest& request, HttpResponse& response) {
  std::vector<int32_t> ids = parse_detokenize_request(parse_json_body(request), runtime.vocab_size);
  write_json(response, 200, {{"prompt", runtime.prompts->tokenizer().decode(ids, false)}});
}

void handle_health(ServerState& state, const ModelRuntime* runtime, HttpResponse& response) {
  if (!runtime) return write_json(response, 503, {{"status", "loading"}});
  if (state.draining()) return write_json(response, 503, {{"status", "draining"}});
  if (runtime->watchdog && !runtime->watchdog->progressing()) return write_json(response, 503, {{"status", "stalled"}});
  if (std::string failure = runtime->engine->stats().backend_failure; !failure.empty())
    return write_json(response, 503, {{"status", "failed"}, {"error", failure}});
  write_json(response, 200, {{"status", "ok"}});
}

void handle_metrics(ServerState& state, const ModelRuntime* runtime, HttpResponse& response) {
  std::optional<EngineStats> stats;
  if (runtime) stats = runtime->engine->stats();
  response.status = 200;
  std::vector<GpuReading> gpus;
  if (GpuProbe* probe = state.gpu_probe()) gpus = probe->read();
  response.set_content(state.metrics().render(stats ? &*stats : nullptr, gpus),
                       "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace qinfer::server
