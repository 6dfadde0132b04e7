// A model's Jinja chat template, rendered the way transformers' apply_chat_template renders it.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace qinfer {

namespace jinja {
class Template;
}

// ordered_json keeps the client's key order: tools are printed with `tojson`, and HF prints keys in the order the
// request gave them.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{"role", "content", "tool_calls"?, ...}]
  nlohmann::ordered_json tools;                                       // null or array of OpenAI tool definitions
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

class ChatTemplate {
 public:
  // From a model directory: chat_template.jinja if present, else tokenizer_config.json's `chat_template` (a string,
  // or a list of {name, template} where "default" is used, "tool_use" when tools are given). Also reads bos_token and
  // eos_token from tokenizer_config.json. Throws Error(kNotFound/kFormat) naming the file and, for syntax errors,
  // the template line.
  static ChatTemplate from_model_dir(const std::filesystem::path& model_dir);
  // From template source, for tests.
  static ChatTemplate from_source(const std::string& source, const std::string& bos_token = "",
                                  const std::string& eos_token = "");

  // Throws Error(kInvalidArgument) for raise_exception() in the template or a render error, naming the line, and
  // for extra_kwargs that are not an object or that set messages/tools/documents/add_generation_prompt or a special
  // token name (bos_token, eos_token, ...).
  std::string render(const ChatTemplateInputs& inputs) const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Template> default_template_;
  std::shared_ptr<const jinja::Template> tool_use_template_;  // may be null
  std::string bos_token_;
  std::string eos_token_;
};

}  // namespace qinfer
