#include "chat_template/chat_template.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "chat_template/jinja/template.h"
#include "util/error.h"

namespace qinfer {

namespace {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot read " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::shared_ptr<const jinja::Template> compile(const std::string& source, const std::string& origin) {
  try {
    return std::make_shared<const jinja::Template>(jinja::Template::parse(source));
  } catch (const Error& e) {
    throw Error(e.kind(), origin + ": " + e.what());
  }
}

// bos_token / eos_token in tokenizer_config.json: a string, null, or an AddedToken object {"content": ...}.
std::string special_token(const nlohmann::ordered_json& config, const char* field, const std::filesystem::path& file) {
  const auto it = config.find(field);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  throw Error(ErrorKind::kFormat,
              file.string() + ": field '" + field + "' expected a string, null or {\"content\": ...}");
}

nlohmann::ordered_json read_config(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorKind::kFormat, path.string() + ": invalid JSON: " + e.what());
  }
}

// Names chat_template_kwargs may not set: the inputs themselves, and the special-token names of HF's tokenizer (which
// apply_chat_template would let kwargs override), so a client cannot redefine a control token the template prints.
bool reserved_variable(const std::string& name) {
  static constexpr std::string_view kReserved[] = {"messages",  "tools",     "documents",  "add_generation_prompt",
                                                   "bos_token", "eos_token", "unk_token",  "sep_token",
                                                   "pad_token", "cls_token", "mask_token", "additional_special_tokens"};
  return std::find(std::begin(kReserved), std::end(kReserved), name) != std::end(kReserved);
}

// The template's variables, as apply_chat_template passes them: messages, tools, documents,
// add_generation_prompt, the special tokens, then the caller's kwargs.
jinja::Value::Dict template_variables(const ChatTemplateInputs& inputs, const std::string& bos_token,
                                      const std::string& eos_token) {
  if (!inputs.extra_kwargs.is_object() && !inputs.extra_kwargs.is_null()) {
    throw Error(ErrorKind::kInvalidArgument, "chat_template_kwargs must be a JSON object");
  }
  jinja::Value::Dict variables;
  variables.emplace_back(jinja::Value::string("messages"), jinja::Value::from_json(inputs.messages));
  variables.emplace_back(jinja::Value::string("tools"), jinja::Value::from_json(inputs.tools));
  variables.emplace_back(jinja::Value::string("documents"), jinja::Value::none());
  variables.emplace_back(jinja::Value::string("add_generation_prompt"),
                         jinja::Value::boolean(inputs.add_generation_prompt));
  if (!bos_token.empty()) variables.emplace_back(jinja::Value::string("bos_token"), jinja::Value::string(bos_token));
  if (!eos_token.empty()) variables.emplace_back(jinja::Value::string("eos_token"), jinja::Value::string(eos_token));
  if (inputs.extra_kwargs.is_object()) {
    for (const auto& [name, value] : inputs.extra_kwargs.items()) {
      if (reserved_variable(name)) {
        throw Error(ErrorKind::kInvalidArgument, "chat_template_kwargs may not set '" + name + "'");
      }
      variables.emplace_back(jinja::Value::string(name), jinja::Value::from_json(value));
    }
  }
  return variables;
}

}  // namespace

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& model_dir) {
  const std::filesystem::path config_path = model_dir / "tokenizer_config.json";
  const std::filesystem::path jinja_path = model_dir / "chat_template.jinja";
  ChatTemplate result;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::exists(config_path)) {
    config = read_config(config_path);
    if (!config.is_object()) throw Error(ErrorKind::kFormat, config_path.string() + ": expected a JSON object");
    result.bos_token_ = special_token(config, "bos_token", config_path);
    result.eos_token_ = special_token(config, "eos_token", config_path);
  }
  if (std::filesystem::exists(jinja_path)) {
    result.default_template_ = compile(read_text_file(jinja_path), jinja_path.string());
    return result;
  }
  const auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) {
    throw Error(ErrorKind::kNotFound, model_dir.string() + ": no chat_template.jinja and no 'chat_template' in " +
                                          config_path.filename().string());
  }
  if (field->is_string()) {
    result.default_template_ = compile(field->get<std::string>(), config_path.string() + " chat_template");
    return result;
  }
  if (!field->is_array()) {
    throw Error(ErrorKind::kFormat, config_path.string() + ": field 'chat_template' expected a string or a list");
  }
  for (const auto& entry : *field) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      throw Error(ErrorKind::kFormat,
                  config_path.string() + ": field 'chat_template' entries expected {\"name\": str, \"template\": str}");
    }
    const std::string name = entry["name"].get<std::string>();
    const std::string origin = config_path.string() + " chat_template '" + name + "'";
    if (name == "default") result.default_template_ = compile(entry["template"].get<std::string>(), origin);
    if (name == "tool_use") result.tool_use_template_ = compile(entry["template"].get<std::string>(), origin);
  }
  if (!result.default_template_) {
    throw Error(ErrorKind::kFormat, config_path.string() + ": field 'chat_template' has no template named 'default'");
  }
  return result;
}

ChatTemplate ChatTemplate::from_source(const std::string& source, const std::string& bos_token,
                                       const std::string& eos_token) {
  ChatTemplate result;
  result.default_template_ = compile(source, "chat template");
  result.bos_token_ = bos_token;
  result.eos_token_ = eos_token;
  return result;
}

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  jinja::Value::Dict variables;
  try {
    variables = template_variables(inputs, bos_token_, eos_token_);
  } catch (const jinja::Failure& failure) {  // request JSON the interpreter cannot hold (nested too deeply)
    throw Error(ErrorKind::kInvalidArgument, std::string("chat template inputs: ") + failure.what());
  }
  const bool use_tool_template = tool_use_template_ && !inputs.tools.is_null();
  return (use_tool_template ? *tool_use_template_ : *default_template_).render(variables);
}

ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

}  // namespace qinfer
