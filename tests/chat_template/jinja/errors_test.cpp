// Template failures become qinfer::Error naming the template line; model directories resolve their template the
// way transformers does (chat_template.jinja first, then tokenizer_config.json's string or named list).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "chat_template/chat_template.h"
#include "chat_template/jinja/template.h"
#include "chat_template_test_data.h"
#include "util/error.h"

namespace qinfer {
namespace {

const std::filesystem::path& kDataDir = test::kChatTemplateDataDir;

std::string read_file(const std::filesystem::path& path) { return test::read_text_file(path); }

// The 1-based line of the first occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

Error render_error(const std::string& source,
                   const nlohmann::ordered_json& messages = nlohmann::ordered_json::array()) {
  ChatTemplateInputs inputs;
  inputs.messages = messages;
  try {
    ChatTemplate::from_source(source).render(inputs);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return Error(ErrorKind::kInternal, "");
}

TEST(JinjaErrors, SyntaxErrorNamesLine) {
  const Error e = render_error("line one\n{% if true %}\n{{ 1 + }}\n{% endif %}");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
}

TEST(JinjaErrors, UnclosedBlockSaysWhatIsMissing) {
  const Error e = render_error("a\n{% for x in y %}\nb");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_NE(std::string(e.what()).find("endfor"), std::string::npos) << e.what();
}

TEST(JinjaErrors, UnknownFilterFailsAtParseLikeJinja2) {
  // jinja2 refuses unknown filters when compiling, even in branches that never run.
  const Error e = render_error("{% if false %}\n{{ x | no_such_filter }}\n{% endif %}");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
}

TEST(JinjaErrors, RuntimeErrorNamesLine) {
  const Error e = render_error("{% set a = 1 %}\ntext\n{{ missing.b.c }}");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'missing' is undefined"), std::string::npos) << e.what();
}

TEST(JinjaErrors, RaiseExceptionCarriesTemplateMessage) {
  const Error e = render_error(
      "{% for m in messages %}\n{% if m.role == 'bad' %}\n"
      "{{ raise_exception('Roles must alternate user/assistant') }}\n{% endif %}\n{% endfor %}",
      nlohmann::ordered_json::parse(R"([{"role": "bad", "content": "x"}])"));
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("Roles must alternate user/assistant"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
}

TEST(JinjaErrors, Qwen3NullAssistantContentFailsAtTheThinkSplitLine) {
  // transformers raises TypeError here too (references.json, qwen3 / tool_call_null_content).
  const std::string source = read_file(kDataDir / "qwen3.jinja");
  const Error e = render_error(
      source,
      nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}])"));
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  const int line = line_of(source, "{%- if '</think>' in message.content %}");
  EXPECT_NE(std::string(e.what()).find("line " + std::to_string(line) + ":"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("NoneType"), std::string::npos) << e.what();
}

class ModelDirTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qinfer_jinja_" + std::to_string(::getpid()) + "_" +
                                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  static std::string render(const ChatTemplate& t, bool with_tools) {
    ChatTemplateInputs inputs;
    inputs.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
    if (with_tools) inputs.tools = nlohmann::ordered_json::parse(R"([{"type": "function"}])");
    return t.render(inputs);
  }
  std::filesystem::path dir_;
};

TEST_F(ModelDirTest, StringTemplateAndAddedTokenObjects) {
  write("tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
                                     "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"})");
  EXPECT_EQ(render(ChatTemplate::from_model_dir(dir_), false), "<s>hi</s>");
}

TEST_F(ModelDirTest, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "default", "template": "D"},
                                                       {"name": "tool_use", "template": "T"}]})");
  const ChatTemplate t = ChatTemplate::from_model_dir(dir_);
  EXPECT_EQ(render(t, false), "D");
  EXPECT_EQ(render(t, true), "T");
}

TEST_F(ModelDirTest, ChatTemplateJinjaFileWins) {
  write("tokenizer_config.json", R"({"chat_template": "from config", "eos_token": "E"})");
  write("chat_template.jinja", "from file {{ eos_token }}\n");
  EXPECT_EQ(render(ChatTemplate::from_model_dir(dir_), false), "from file E");
}

TEST_F(ModelDirTest, MissingTemplateIsNotFound) {
  write("tokenizer_config.json", R"({"eos_token": "E"})");
  try {
    ChatTemplate::from_model_dir(dir_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
}

TEST_F(ModelDirTest, MalformedConfigNamesFileAndField) {
  write("tokenizer_config.json", R"({"chat_template": 5})");
  try {
    ChatTemplate::from_model_dir(dir_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
  }
  write("tokenizer_config.json", "{not json");
  EXPECT_THROW(ChatTemplate::from_model_dir(dir_), Error);
}

TEST_F(ModelDirTest, SyntaxErrorNamesFileAndLine) {
  write("chat_template.jinja", "ok\n{% for %}");
  try {
    ChatTemplate::from_model_dir(dir_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find("chat_template.jinja"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateKwargs, MayNotRedefineReservedVariables) {
  ChatTemplateInputs inputs;
  inputs.extra_kwargs = nlohmann::ordered_json::parse(R"({"messages": []})");
  EXPECT_THROW(ChatTemplate::from_source("x").render(inputs), Error);
  inputs.extra_kwargs = nlohmann::ordered_json::parse("[1]");
  EXPECT_THROW(ChatTemplate::from_source("x").render(inputs), Error);
}

TEST(JinjaLimits, EndlessLoopsAndHugeStringsStopWithAnError) {
  jinja::RenderLimits limits;
  limits.max_steps = 10000;
  const jinja::Template loops =
      jinja::Template::parse("{% for a in range(99999) %}{% for b in range(99999) %}x{% endfor %}{% endfor %}");
  EXPECT_THROW(loops.render({}, limits), Error);
  const jinja::Template doubling = jinja::Template::parse(
      "{% set ns = namespace(s='abcdefgh') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}");
  EXPECT_THROW(doubling.render({}), Error);
  const jinja::Template recursion = jinja::Template::parse("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_THROW(recursion.render({}), Error);
  // Nested namespaces (allowed by jinja2) could form cycles or unbounded chains, so qinfer refuses them.
  const jinja::Template chain = jinja::Template::parse(
      "{% set ns = namespace(cur=none) %}{% for i in range(10) %}{% set n = namespace(up=ns.cur) %}"
      "{% set ns.cur = n %}{% endfor %}");
  EXPECT_THROW(chain.render({}), Error);
  const jinja::Template deep_list = jinja::Template::parse(
      "{% set ns = namespace(cur=[]) %}{% for i in range(2000) %}{% set ns.cur = [ns.cur] %}{% endfor %}{{ ns.cur }}");
  EXPECT_THROW(deep_list.render({}), Error);
  ChatTemplateInputs deep_input;
  nlohmann::ordered_json nested_json = "leaf";
  for (int i = 0; i < 1000; ++i) nested_json = nlohmann::ordered_json::array({nested_json});
  deep_input.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", nested_json}}});
  EXPECT_THROW(ChatTemplate::from_source("{{ messages }}").render(deep_input), Error);
  std::string nested(5000, '(');
  EXPECT_THROW(jinja::Template::parse("{{ " + nested + "1" + std::string(5000, ')') + " }}"), Error);
}

// jinja2 would hit Python's recursion limit; qinfer's call-depth bound covers recursive loops and caller() too.
TEST(JinjaLimits, EndlessRecursiveLoopsAndCallersStopWithAnError) {
  const jinja::Template loop = jinja::Template::parse("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}");
  EXPECT_THROW(loop.render({}), Error);
  const jinja::Template caller =
      jinja::Template::parse("{% macro m() %}{% call m() %}{{ caller() }}{% endcall %}{% endmacro %}{{ m() }}");
  EXPECT_THROW(caller.render({}), Error);
}

// caller() renders its block in the scope of the call statement, so (unlike jinja2) it refuses to run after it.
TEST(JinjaErrors, CallerUsedAfterItsCallBlockNamesTheProblem) {
  const Error e = render_error(
      "{% set ns = namespace(c=none) %}{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
      "{% call m() %}x{% endcall %}\n{{ ns.c() }}");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("after its call block ended"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace qinfer
