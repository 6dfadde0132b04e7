#include "loadgen/completion_chunk.h"

#include <nlohmann/json.hpp>

namespace qinfer::loadgen {

namespace {

using Json = nlohmann::json;

bool non_empty_string(const Json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

std::optional<long> integer_field(const Json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<long>();
}

}  // namespace

CompletionChunk parse_completion_chunk(std::string_view data) {
  CompletionChunk chunk;
  if (data == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  const Json json = Json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    chunk.error = "stream event is not a JSON object: " + std::string(data.substr(0, 200));
    return chunk;
  }
  if (const auto error = json.find("error"); error != json.end() && !error->is_null()) {
    chunk.error = error->is_object() && error->contains("message") ? error->at("message").dump() : error->dump();
    return chunk;
  }
  if (const auto choices = json.find("choices"); choices != json.end() && choices->is_array()) {
    for (const Json& choice : *choices) {
      if (!choice.is_object()) continue;
      const auto delta = choice.find("delta");
      const bool delta_text = delta != choice.end() && delta->is_object() &&
                              (non_empty_string(*delta, "content") || non_empty_string(*delta, "reasoning_content"));
      if (non_empty_string(choice, "text") || delta_text) chunk.has_text = true;
    }
  }
  if (const auto usage = json.find("usage"); usage != json.end() && usage->is_object()) {
    chunk.prompt_tokens = integer_field(*usage, "prompt_tokens");
    chunk.completion_tokens = integer_field(*usage, "completion_tokens");
  }
  return chunk;
}

}  // namespace qinfer::loadgen
