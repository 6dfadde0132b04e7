// `qinfer serve --help` in groups (model, engine, KV cache, API, HTTP server, logs and metrics), whichever file
// defines a flag.
#pragma once

#include <CLI/CLI.hpp>

namespace qinfer::cli {

// Puts every option of `serve` into its group; options the table does not know go to "Other".
void group_serve_flags(CLI::App& serve);

}  // namespace qinfer::cli
