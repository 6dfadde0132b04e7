#include "cli/parse_errors.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace qinfer::cli {
namespace {

// The app and the subcommands the command line selected, outermost first: their flags are all valid there, since
// subcommands pass flags they do not know to their parent (CLI11 fallthrough).
std::vector<const CLI::App*> selected_chain(const CLI::App& app) {
  std::vector<const CLI::App*> chain = {&app};
  while (true) {
    const std::vector<CLI::App*> selected = chain.back()->get_subcommands();
    if (selected.empty()) return chain;
    chain.push_back(selected.front());
  }
}

std::vector<std::string> flag_names(const std::vector<const CLI::App*>& chain) {
  std::vector<std::string> names;
  for (const CLI::App* app : chain)
    for (const CLI::Option* option : app->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    }
  return names;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string command_path(const std::vector<const CLI::App*>& chain) {
  std::string path = "qinfer";
  for (size_t i = 1; i < chain.size(); ++i) path += " " + chain[i]->get_name();
  return path;
}

}  // namespace

std::vector<std::string> normalize_flag_spelling(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;                            // everything after is positional
    if (arg == "-tp") arg = "--tensor-parallel-size";  // vLLM's two-letter short flag (CLI11 allows one letter)
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const size_t name_end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + 2, arg.begin() + static_cast<std::ptrdiff_t>(name_end), '_', '-');
  }
  return args;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_name(std::string_view unknown, const std::vector<std::string>& known) {
  // A typo changes a few characters; allow about one edit per five characters, at least two.
  const size_t limit = std::max<size_t>(2, unknown.size() / 5);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& name : known) {
    const size_t distance = edit_distance(unknown, name);
    if (distance < best_distance) {
      best_distance = distance;
      best = name;
    }
  }
  return best;
}

int report_parse_error(CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);  // help, version
  const std::vector<const CLI::App*> chain = selected_chain(app);
  const std::string command = command_path(chain);
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr) {
    std::fprintf(stderr, "qinfer: error: %s\n", error.what());
  } else {
    const std::vector<std::string> flags = flag_names(chain);
    const std::vector<std::string> subcommands = subcommand_names(*chain.back());
    for (const std::string& arg : app.remaining(true)) {
      const bool is_flag = arg.size() > 1 && arg[0] == '-';
      const std::string name = is_flag ? arg.substr(0, arg.find('=')) : arg;
      std::optional<std::string> suggestion = closest_name(name, is_flag ? flags : subcommands);
      std::fprintf(stderr, "qinfer: error: %sunknown %s '%s'%s\n", chain.size() > 1 ? (command + ": ").c_str() : "",
                   is_flag ? "flag" : "argument", arg.c_str(),
                   suggestion ? (" (did you mean '" + *suggestion + "'?)").c_str() : "");
    }
  }
  std::fprintf(stderr, "Run '%s --help' for the flags.\n", command.c_str());
  return 2;
}

}  // namespace qinfer::cli
