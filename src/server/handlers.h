// Route handlers. Each parses and validates its request, hands typed work to the engine (or answers from the
// tokenizer / metrics), and writes the response. Failures are thrown as ApiError and turned into OpenAI error JSON by
// the dispatcher (http_server.cpp), which also checks auth, draining and that the model is loaded.
#pragma once

#include <nlohmann/json.hpp>

#include "server/http_message.h"
#include "server/openai_request.h"
#include "server/server_state.h"

namespace qinfer::server {

// The JSON body as ordered_json (tools keep the client's key order). 400 for malformed or too deeply nested JSON.
nlohmann::ordered_json parse_json_body(const HttpRequest& request);
void write_json(HttpResponse& response, int status, const nlohmann::json& body);

// POST /v1/chat/completions and /v1/completions.
void handle_generation(ApiKind kind, ServerState& state, const ModelRuntime& runtime, const HttpRequest& request,
                       HttpResponse& response);

void handle_models(ServerState& state, const ModelRuntime& runtime, const HttpRequest& request, HttpResponse& response);
void handle_tokenize(ServerState& state, const ModelRuntime& runtime, const HttpRequest& request,
                     HttpResponse& response);
void handle_detokenize(ServerState& state, const ModelRuntime& runtime, const HttpRequest& request,
                       HttpResponse& response);
// /health and /metrics work while the model loads (runtime may be null).
void handle_health(ServerState& state, const ModelRuntime* runtime, HttpResponse& response);
void handle_metrics(ServerState& state, const ModelRuntime* runtime, HttpResponse& response);
// GET / and GET /static/...: the chat page compiled in from web/ (web_assets.h), with a strict Content-Security-Policy
// and ETag revalidation; open without the API key (the page asks for it). 404 for a path that is not embedded.
void handle_web_asset(const HttpRequest& request, HttpResponse& response);

}  // namespace qinfer::server
