// Rendering a typical 5-message chat must be cheap next to tokenization: the target is well under 50 µs. The
// assertion is loose (shared CI machines); the measured figure is printed and recorded as a test property. Time is
// this thread's CPU time, so other processes on a busy machine do not inflate it.
#include <gtest/gtest.h>
#include <time.h>

#include <fstream>
#include <sstream>

#include "chat_template/chat_template.h"
#include "chat_template_test_data.h"

namespace qinfer {
namespace {

const std::filesystem::path& kDataDir = test::kChatTemplateDataDir;

std::string read_file(const std::filesystem::path& path) { return test::read_text_file(path); }

double thread_cpu_microseconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

double microseconds_per_render(const std::string& template_file) {
  const ChatTemplate chat_template = ChatTemplate::from_source(read_file(kDataDir / template_file), "", "<|im_end|>");
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are a helpful assistant. Answer concisely and cite sources when you can."},
    {"role": "user", "content": "What is the capital of France, and what is it famous for?"},
    {"role": "assistant", "content": "Paris. It is famous for the Eiffel Tower, the Louvre and its cafés."},
    {"role": "user", "content": "Give me three museums there, one line each."},
    {"role": "assistant", "content": "1. The Louvre\n2. Musée d'Orsay\n3. Centre Pompidou"}])");
  constexpr int kWarmup = 200;
  constexpr int kRenders = 3000;
  size_t bytes = 0;
  for (int i = 0; i < kWarmup; ++i) bytes += chat_template.render(inputs).size();
  const double start = thread_cpu_microseconds();
  for (int i = 0; i < kRenders; ++i) bytes += chat_template.render(inputs).size();
  const double elapsed = thread_cpu_microseconds() - start;
  EXPECT_GT(bytes, 0u);
  return elapsed / kRenders;
}

TEST(JinjaSpeed, FiveMessageChat) {
  for (const char* name : {"qwen3_instruct_2507.jinja", "qwen3.jinja"}) {
    const double us = microseconds_per_render(name);
    std::printf("%s: %.1f us per 5-message render\n", name, us);
    RecordProperty(name, std::to_string(us));
    EXPECT_LT(us, 2000.0) << name;
  }
}

}  // namespace
}  // namespace qinfer
