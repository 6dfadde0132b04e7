#include "loadgen/request_body.h"

#include <nlohmann/json.hpp>

namespace qinfer::loadgen {

std::string request_body(const RequestShape& shape, const PromptSpec& prompt) {
  const int max_tokens = prompt.output_len.value_or(shape.output_len);
  nlohmann::json body = {
      {"model", shape.model},     {"stream", true},     {"stream_options", {{"include_usage", true}}},
      {"max_tokens", max_tokens}, {"ignore_eos", true}, {"temperature", 0}};
  if (shape.chat)
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt.text}}});
  else
    body["prompt"] = prompt.text;
  if (shape.extra_body.is_object()) body.update(shape.extra_body);
  return body.dump();
}

}  // namespace qinfer::loadgen
