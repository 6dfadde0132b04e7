// How the command line is read before CLI11 sees it, and how its errors are reported: every flag error is
// `qinfer: error: ...` on stderr with exit code 2 (with "did you mean --x?" for a near miss), as README promises.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer::cli {

// argv with vLLM's spelling rule applied: in a long flag's name (`--name` or `--name=value`) underscores become
// dashes, so `--tokenizer_mode auto` is `--tokenizer-mode auto`. Values are left as they are. vLLM's `-tp` becomes
// `--tensor-parallel-size`.
std::vector<std::string> normalize_flag_spelling(int argc, const char* const* argv);

// Levenshtein distance (insertions, deletions, substitutions of single bytes).
size_t edit_distance(std::string_view a, std::string_view b);

// The known name closest to `unknown` when it is close enough to be a typo (a few edits, fewer for short names).
std::optional<std::string> closest_name(std::string_view unknown, const std::vector<std::string>& known);

// Prints `error` and returns the exit code: --help and --version print to stdout and return 0; every other parse
// error prints `qinfer: error: MESSAGE` (plus a suggestion for unknown flags and subcommands) and returns 2.
int report_parse_error(CLI::App& app, const CLI::ParseError& error);

}  // namespace qinfer::cli
