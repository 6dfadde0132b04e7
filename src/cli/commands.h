// Each qinfer subcommand registers itself on the CLI11 app; main() only parses and dispatches.
// A register function adds the subcommand, its flags and a callback that runs it. Callbacks throw qinfer::Error for
// user errors; main() maps them to an exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace qinfer::cli {

void register_download(CLI::App& app);
void register_generate(CLI::App& app);
void register_make_test_model(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_bench(CLI::App& app);
void register_serve(CLI::App& app);
// `bench serve` (cmd_bench_serve.cpp), added to the `bench` sub-app by register_bench.
void register_bench_serve(CLI::App& bench);

}  // namespace qinfer::cli
