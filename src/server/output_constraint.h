// The grammar and scope a chat or completion request's output is generated under:
// - response_format / structured_outputs / guided_*: the whole output (JSON ones after the reasoning, below);
// - tool_choice "required" or a named function: tool calls only, in the Hermes/Qwen3 shape, each call's arguments
//   matching its function's parameters schema (one call unless parallel_tool_calls);
// - tool_choice "auto" with tools marked strict: free text until the model opens <tool_call>, then one call under the
//   grammar (calls to the tools without strict: any JSON object as arguments), then free text again;
// - with --reasoning-parser, JSON and tool-call constraints apply after the reasoning: the output may open with
//   <think>...</think> (or starts inside it when the prompt opened it), free, and the grammar starts after </think>.
//   Regex, choice and GBNF constraints cover the whole output (they may spell the reasoning themselves).
#pragma once

#include "engine/request.h"
#include "grammar/grammar_compiler.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace qinfer::server {

// Sets generation.constraint and generation.constraint_scope. Throws ApiError 400 naming the field for a constraint
// that does not compile (a tool's parameters schema: tools[i].function.parameters) or for a combination it cannot
// honour (response_format with a tool-call grammar).
void apply_output_constraint(const CompletionWork& work, const Tokenizer& tokenizer, grammar::GrammarCompiler& compiler,
                             GenerationRequest& generation);

// The request field a request's constraint comes from: the structured-output field (response_format, guided_json, ...)
// or "tools".
std::string constraint_param(const CompletionWork& work);

}  // namespace qinfer::server
