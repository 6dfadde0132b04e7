// Time to open and validate a checkpoint: mmap, safetensors header checks, config parsing and binding of every tensor.
// Usage: model_load_bench MODEL_DIR [repeats]. Run it twice so the second run reads from the page cache.
#include <chrono>
#include <cstdio>
#include <string>

#include "model/qwen3_weights.h"
#include "util/error.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [repeats]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 5;
  try {
    double best_ms = 1e30;
    size_t bytes = 0;
    for (int i = 0; i < repeats; ++i) {
      auto start = std::chrono::steady_clock::now();
      qinfer::LoadedModel m = qinfer::load_model(argv[1]);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      best_ms = std::min(best_ms, ms);
      bytes = static_cast<size_t>(m.config.num_parameters()) * 2;
    }
    std::printf("{\"model\": \"%s\", \"weight_bytes\": %zu, \"open_and_validate_ms_best\": %.2f, \"repeats\": %d}\n",
                argv[1], bytes, best_ms, repeats);
  } catch (const qinfer::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return qinfer::error_kind_exit_code(e.kind());
  }
  return 0;
}
