// qinfer: serve | generate | tokenize | bench | download | make-test-model. Thin: parse flags, call the layers.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/parse_errors.h"
#include "cli/version.h"
#include "util/error.h"
#include "util/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"qinfer: OpenAI-compatible inference server for Qwen3 dense models"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", qinfer::cli::version_string());
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")->capture_default_str();
  app.parse_complete_callback([&] { qinfer::init_logging(log_level); });
  // Subcommands hand flags they do not know to the app, so global flags (--log-level) work after the subcommand too.
  // Set before the subcommands are added: they inherit it.
  app.fallthrough();
  qinfer::cli::register_generate(app);
  qinfer::cli::register_tokenize(app);
  qinfer::cli::register_bench(app);
  qinfer::cli::register_download(app);
  qinfer::cli::register_make_test_model(app);
  qinfer::cli::register_serve(app);
  const std::vector<std::string> args = qinfer::cli::normalize_flag_spelling(argc, argv);
  std::vector<const char*> arg_pointers;
  for (const std::string& arg : args) arg_pointers.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
    if (app.get_subcommands().empty()) {
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
  } catch (const CLI::ParseError& e) {
    return qinfer::cli::report_parse_error(app, e);
  } catch (const qinfer::Error& e) {
    std::fprintf(stderr, "qinfer: error: %s\n", e.what());
    return qinfer::error_kind_exit_code(e.kind());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qinfer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
