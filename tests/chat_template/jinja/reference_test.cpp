// Every (template, case) of tests/data/chat_templates/cases.json must render byte for byte as transformers 5.17's
// apply_chat_template rendered it (references.json), or fail where it failed.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_template/chat_template.h"
#include "chat_template_test_data.h"
#include "util/error.h"

namespace qinfer {
namespace {

const std::filesystem::path& kDataDir = test::kChatTemplateDataDir;

std::string read_file(const std::filesystem::path& path) { return test::read_text_file(path); }

using test::read_ordered_json;

TEST(JinjaReference, EveryCaseMatchesTransformers) {
  const nlohmann::ordered_json spec = read_ordered_json(kDataDir / "cases.json");
  const nlohmann::ordered_json references = read_ordered_json(kDataDir / "references.json");
  ASSERT_EQ(references["engine"], "transformers");
  size_t index = 0;
  size_t compared = 0;
  for (const auto& template_spec : spec["templates"]) {
    const ChatTemplate chat_template = ChatTemplate::from_source(
        read_file(kDataDir / template_spec["file"].get<std::string>()), template_spec["bos_token"].get<std::string>(),
        template_spec["eos_token"].get<std::string>());
    for (const auto& chat_case : spec["cases"]) {
      const auto& reference = references["renders"][index++];
      ASSERT_EQ(reference["template"], template_spec["name"]);
      ASSERT_EQ(reference["case"], chat_case["name"]);
      SCOPED_TRACE(template_spec["name"].get<std::string>() + " / " + chat_case["name"].get<std::string>());
      ChatTemplateInputs inputs;
      inputs.messages = chat_case["messages"];
      if (chat_case.value("tools", false)) inputs.tools = spec["tools"];
      inputs.add_generation_prompt = chat_case.value("add_generation_prompt", true);
      if (template_spec.contains("kwargs")) inputs.extra_kwargs = template_spec["kwargs"];
      if (chat_case.contains("kwargs")) {
        for (const auto& [key, value] : chat_case["kwargs"].items()) inputs.extra_kwargs[key] = value;
      }
      if (reference.contains("error")) {
        EXPECT_THROW(chat_template.render(inputs), Error) << "transformers failed with " << reference["error"];
      } else {
        std::string rendered;
        try {
          rendered = chat_template.render(inputs);
        } catch (const Error& e) {
          ADD_FAILURE() << e.what();
          continue;
        }
        EXPECT_EQ(rendered, reference["text"].get<std::string>());
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, references["renders"].size());
}

}  // namespace
}  // namespace qinfer
