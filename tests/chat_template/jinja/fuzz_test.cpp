// Random mutations of the real chat templates (and random message text) must only ever produce a rendered string
// or a qinfer::Error: never a crash, a hang or another exception type.
#include <gtest/gtest.h>

#include <random>

#include "chat_template/chat_template.h"
#include "chat_template/jinja/template.h"
#include "chat_template_test_data.h"
#include "util/error.h"

namespace qinfer::jinja {
namespace {

const std::filesystem::path& kDataDir = test::kChatTemplateDataDir;
using test::read_text_file;

constexpr const char* kFragments[] = {"{%",
                                      "%}",
                                      "{{",
                                      "}}",
                                      "{#",
                                      "#}",
                                      "-",
                                      "+",
                                      "(",
                                      ")",
                                      "[",
                                      "]",
                                      "{",
                                      "}",
                                      "'",
                                      "\"",
                                      "|",
                                      ".",
                                      ",",
                                      ":",
                                      " if ",
                                      " else ",
                                      " for x in ",
                                      "{% endfor %}",
                                      "{% endif %}",
                                      "loop.",
                                      "ns.",
                                      "[::-1]",
                                      "\\",
                                      "\n",
                                      " is ",
                                      " not ",
                                      " in ",
                                      "raise_exception(",
                                      "*",
                                      "**",
                                      "~",
                                      "namespace(",
                                      "range(999)",
                                      "|tojson(indent=2)",
                                      "|join",
                                      "{% set x = ",
                                      "{% macro m(a) %}",
                                      "{% endmacro %}",
                                      "m(1)",
                                      "{% raw %}",
                                      "{% endraw %}",
                                      "\xff",
                                      "\xc3",
                                      "None",
                                      "messages[0]",
                                      ".split(",
                                      "|length",
                                      "//",
                                      "%",
                                      "loop.cycle(1)",
                                      "{% break %}",
                                      "{% continue %}",
                                      " recursive %}",
                                      "loop(messages)",
                                      "{% call m(1) %}",
                                      "{% call(a) m(2) %}",
                                      "{% endcall %}",
                                      "caller()",
                                      "|select",
                                      "|map('string')",
                                      "|list",
                                      "|first"};

std::string mutate(std::string text, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = text.empty() ? 0 : rng() % text.size();
    switch (rng() % 4) {
      case 0:
        text.erase(at, 1 + rng() % 12);
        break;
      case 1:
        text.insert(at, kFragments[rng() % std::size(kFragments)]);
        break;
      case 2:
        if (!text.empty()) text[at] = static_cast<char>(rng() % 256);
        break;
      default: {
        const size_t from = text.empty() ? 0 : rng() % text.size();
        text.insert(at, text.substr(from, 1 + rng() % 40));
      }
    }
  }
  return text;
}

std::string random_text(std::mt19937& rng) {
  static constexpr const char* kPieces[] = {"hi", " ",  "\n", "<think>", "</think>", "<tool_response>", "{{", "%}", "é",
                                            "😀",  "\"", "'",  "\\",      "\x01",     "</tool_response>"};
  std::string text;
  const int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) text += kPieces[rng() % std::size(kPieces)];
  return text;
}

nlohmann::ordered_json random_messages(std::mt19937& rng) {
  static constexpr const char* kRoles[] = {"system", "user", "assistant", "tool", "other"};
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  const int n = 1 + static_cast<int>(rng() % 5);
  for (int i = 0; i < n; ++i) {
    nlohmann::ordered_json message = {{"role", kRoles[rng() % std::size(kRoles)]}, {"content", random_text(rng)}};
    if (rng() % 5 == 0) message["content"] = nullptr;
    if (rng() % 4 == 0) {
      message["tool_calls"] = nlohmann::ordered_json::array(
          {{{"type", "function"}, {"function", {{"name", random_text(rng)}, {"arguments", {{"a", rng() % 100}}}}}}});
    }
    if (rng() % 4 == 0) message["reasoning_content"] = random_text(rng);
    messages.push_back(message);
  }
  return messages;
}

TEST(JinjaFuzz, MutatedRealTemplatesOnlyEverThrowQinferErrors) {
  std::mt19937 rng(20261129);
  RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = size_t{1} << 20;
  int rendered = 0;
  int refused = 0;
  for (const char* name : {"qwen3.jinja", "qwen3_instruct_2507.jinja", "qwen3_thinking_2507.jinja", "qwen2_5.jinja",
                           "llama3_2.jinja", "llama3.jinja"}) {
    const std::string source = read_text_file(kDataDir / name);
    ASSERT_FALSE(source.empty()) << name;
    for (int i = 0; i < 1000; ++i) {
      const std::string mutated = mutate(source, rng);
      const Value context = Value::from_json(
          {{"messages", random_messages(rng)},
           {"tools", rng() % 2 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json::array({{{"a", 1}}})},
           {"add_generation_prompt", rng() % 2 == 0},
           {"enable_thinking", rng() % 2 == 0},
           {"bos_token", "<s>"}});
      try {
        Template::parse(mutated).render(context.entries(), limits);
        ++rendered;
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  // Both outcomes must occur, or the mutations are too weak (or too strong) to test anything.
  EXPECT_GT(rendered, 100);
  EXPECT_GT(refused, 100);
  RecordProperty("rendered", rendered);
  RecordProperty("refused", refused);
}

TEST(JinjaFuzz, RealTemplatesWithRandomMessagesOnlyEverThrowQinferErrors) {
  std::mt19937 rng(7);
  for (const char* name :
       {"qwen3.jinja", "qwen3_instruct_2507.jinja", "qwen3_thinking_2507.jinja", "qwen2_5.jinja", "llama3_2.jinja"}) {
    const ChatTemplate chat_template = ChatTemplate::from_source(read_text_file(kDataDir / name), "<s>", "</s>");
    for (int i = 0; i < 300; ++i) {
      ChatTemplateInputs inputs;
      inputs.messages = random_messages(rng);
      inputs.add_generation_prompt = rng() % 2 == 0;
      try {
        chat_template.render(inputs);
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace qinfer::jinja
