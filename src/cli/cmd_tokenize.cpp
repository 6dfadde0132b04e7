// qinfer tokenize: the model's tokenizer and chat template from the command line, one mode per call:
//   --text STR            → JSON array of ids
//   --jsonl               → stdin: one JSON string per line → stdout: one JSON array of ids per line
//   --jsonl --decode      → stdin: one JSON array of ids per line → stdout: one JSON string per line
//   --chat FILE           → {"messages", "tools", "add_generation_prompt", "chat_template_kwargs"} → {"text", "ids"}
// Input JSON that cannot be parsed (including lone surrogates such as "\ud800") is rejected naming the line.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat_template/chat_template.h"
#include "cli/commands.h"
#include "model/model_path.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_file.h"

namespace qinfer::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string text;
  bool has_text = false;
  bool jsonl = false;
  bool decode = false;
  bool skip_special_tokens = false;
  bool no_special_tokens = false;
  std::string chat_file;
};

std::string dump(const nlohmann::json& value) { return value.dump(-1, ' ', false); }

nlohmann::json parse_line(const std::string& line, size_t line_number) {
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorKind::kInvalidArgument, "stdin line " + std::to_string(line_number) + ": " + e.what());
  }
}

void encode_lines(const Tokenizer& tokenizer, const TokenizeFlags& flags) {
  std::string line;
  for (size_t number = 1; std::getline(std::cin, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json value = parse_line(line, number);
    if (!value.is_string()) {
      throw Error(ErrorKind::kInvalidArgument, "stdin line " + std::to_string(number) + ": expected a JSON string");
    }
    std::cout << dump(tokenizer.encode(value.get<std::string>(), !flags.no_special_tokens)) << '\n';
  }
}

void decode_lines(const Tokenizer& tokenizer, const TokenizeFlags& flags) {
  std::string line;
  for (size_t number = 1; std::getline(std::cin, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json value = parse_line(line, number);
    std::vector<int32_t> ids;
    const bool all_ints =
        value.is_array() && std::all_of(value.begin(), value.end(), [](const nlohmann::json& id) {
          return id.is_number_integer() && id.get<int64_t>() >= INT32_MIN && id.get<int64_t>() <= INT32_MAX;
        });
    if (!all_ints) {
      throw Error(ErrorKind::kInvalidArgument,
                  "stdin line " + std::to_string(number) + ": expected a JSON array of integer ids");
    }
    for (const auto& id : value) ids.push_back(id.get<int32_t>());
    std::cout << dump(tokenizer.decode(ids, flags.skip_special_tokens)) << '\n';
  }
}

void render_chat(const Tokenizer& tokenizer, const std::filesystem::path& model_dir, const std::string& chat_file) {
  // Ordered: the template renders tool JSON in the client's key order, as the server and transformers do.
  const nlohmann::ordered_json request = read_ordered_json_file(chat_file);
  if (!request.is_object() || !request.contains("messages") || !request["messages"].is_array()) {
    throw Error(ErrorKind::kInvalidArgument, chat_file + ": field 'messages' expected an array");
  }
  ChatTemplateInputs inputs;
  inputs.messages = request["messages"];
  inputs.tools = request.value("tools", nlohmann::ordered_json());
  const nlohmann::ordered_json add_generation_prompt = request.value("add_generation_prompt", nlohmann::ordered_json());
  if (!add_generation_prompt.is_null() && !add_generation_prompt.is_boolean())
    throw Error(ErrorKind::kInvalidArgument,
                chat_file + ": field 'add_generation_prompt' expected a boolean, got " + add_generation_prompt.dump());
  inputs.add_generation_prompt = add_generation_prompt.is_null() || add_generation_prompt.get<bool>();
  inputs.extra_kwargs = request.value("chat_template_kwargs", nlohmann::ordered_json::object());
  if (!inputs.extra_kwargs.is_object()) {
    throw Error(ErrorKind::kInvalidArgument, chat_file + ": field 'chat_template_kwargs' expected an object");
  }
  const std::string text = ChatTemplate::from_model_dir(model_dir).render(inputs);
  // The template writes the control tokens itself, so special tokens are matched in its output.
  std::cout << dump({{"text", text}, {"ids", tokenizer.encode(text)}}) << '\n';
}

void run_tokenize(const TokenizeFlags& flags) {
  const int modes = (flags.has_text ? 1 : 0) + (flags.jsonl ? 1 : 0) + (flags.chat_file.empty() ? 0 : 1);
  if (modes != 1) throw Error(ErrorKind::kInvalidArgument, "tokenize: give exactly one of --text, --jsonl, --chat");
  if (flags.decode && !flags.jsonl) throw Error(ErrorKind::kInvalidArgument, "tokenize: --decode needs --jsonl");
  const std::filesystem::path model_dir = resolve_model_dir(flags.model);
  const Tokenizer tokenizer = Tokenizer::from_model_dir(model_dir);
  if (flags.has_text) {
    std::cout << dump(tokenizer.encode(flags.text, !flags.no_special_tokens)) << '\n';
  } else if (flags.jsonl && flags.decode) {
    decode_lines(tokenizer, flags);
  } else if (flags.jsonl) {
    encode_lines(tokenizer, flags);
  } else {
    render_chat(tokenizer, model_dir, flags.chat_file);
  }
  std::cout.flush();
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode/decode text or render a chat with the model's tokenizer");
  cmd->add_option("--model", flags->model, "Model directory or HF repo id in the HF cache")->required();
  cmd->add_option_function<std::string>(
      "--text",
      [flags](const std::string& text) {
        flags->text = text;
        flags->has_text = true;
      },
      "Text to encode; prints the JSON array of ids");
  cmd->add_flag("--jsonl", flags->jsonl, "Read one JSON string per stdin line, print one JSON array of ids per line");
  cmd->add_flag("--decode", flags->decode, "With --jsonl: read JSON arrays of ids, print decoded JSON strings");
  cmd->add_flag("--skip-special-tokens", flags->skip_special_tokens, "With --decode: drop special tokens");
  cmd->add_flag("--no-special-tokens", flags->no_special_tokens,
                "Encode special-token text as ordinary bytes (for untrusted text)");
  cmd->add_option("--chat", flags->chat_file,
                  "JSON file {messages, tools, add_generation_prompt, chat_template_kwargs}; prints {text, ids}");
  cmd->callback([flags] { run_tokenize(*flags); });
}

}  // namespace qinfer::cli
