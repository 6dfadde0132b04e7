// Small templates that each probe one jinja2 rule (whitespace control, Python value printing, scoping, filters,
// tests, methods, tojson, errors), rendered by jinja2 3.1.6 configured like transformers
// (tests/data/chat_templates/snippet_references.json, made by tools/chat_template_reference.py --snippets).
#include <gtest/gtest.h>

#include "chat_template/jinja/template.h"
#include "chat_template_test_data.h"
#include "util/error.h"

namespace qinfer::jinja {
namespace {

const std::filesystem::path& kDataDir = test::kChatTemplateDataDir;
using test::read_ordered_json;

class SnippetTest : public testing::TestWithParam<size_t> {
 protected:
  static void SetUpTestSuite() {
    snippets_ = new nlohmann::ordered_json(read_ordered_json(kDataDir / "snippets.json"));
    references_ = new nlohmann::ordered_json(read_ordered_json(kDataDir / "snippet_references.json"));
  }
  static void TearDownTestSuite() {
    delete snippets_;
    delete references_;
  }
  static nlohmann::ordered_json* snippets_;
  static nlohmann::ordered_json* references_;
};

nlohmann::ordered_json* SnippetTest::snippets_ = nullptr;
nlohmann::ordered_json* SnippetTest::references_ = nullptr;

// Runtime errors keep Python's/jinja2's message ("TypeError: <message>"); syntax errors are worded differently (qinfer
// names the line), and two runtime errors deliberately differ: unpacking also says how many values came (as Python
// 3.13 does), and include/import are refused when the template is parsed.
bool message_must_match(const std::string& name, const std::string& reference_error) {
  if (reference_error.starts_with("TemplateSyntaxError") || reference_error.starts_with("TemplateAssertionError")) {
    return false;
  }
  return name != "error_unpack" && name != "error_include_refused";
}

TEST_P(SnippetTest, MatchesJinja2) {
  ASSERT_LT(GetParam(), snippets_->size()) << "fewer snippets than the test expects";
  const auto& snippet = (*snippets_)[GetParam()];
  const auto& reference = (*references_)["renders"][GetParam()];
  ASSERT_EQ(snippet["name"], reference["name"]);
  SCOPED_TRACE(snippet["name"].get<std::string>() + ": " + snippet["template"].get<std::string>());
  const Value context = Value::from_json(snippet["context"]);
  if (reference.contains("error")) {
    const std::string expected = reference["error"].get<std::string>();
    try {
      Template::parse(snippet["template"].get<std::string>()).render(context.entries());
      ADD_FAILURE() << "jinja2 raised " << expected;
    } catch (const Error& e) {
      if (message_must_match(snippet["name"].get<std::string>(), expected)) {
        EXPECT_NE(std::string(e.what()).find(expected.substr(expected.find(": ") + 2)), std::string::npos)
            << "jinja2 raised " << expected << "\nqinfer: " << e.what();
      }
    }
    return;
  }
  try {
    EXPECT_EQ(Template::parse(snippet["template"].get<std::string>()).render(context.entries()),
              reference["text"].get<std::string>());
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(SnippetData, ReferencesCoverEverySnippet) {
  EXPECT_EQ(read_ordered_json(kDataDir / "snippets.json").size(),
            read_ordered_json(kDataDir / "snippet_references.json")["renders"].size());
}

// One test per snippet so a failure names the rule that broke.
INSTANTIATE_TEST_SUITE_P(All, SnippetTest,
                         testing::Range<size_t>(0, read_ordered_json(kDataDir / "snippets.json").size()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return read_ordered_json(kDataDir / "snippets.json")[info.param]["name"].get<std::string>();
                         });

}  // namespace
}  // namespace qinfer::jinja
