#include "cli/model_loading.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "model/model_path.h"
#include "model/online_quantization.h"
#include "model/test_model.h"
#include "util/byte_size.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/logging.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace qinfer::cli {

namespace {

constexpr const char* kDemoPreset = "tiny";

// A quantized model must be in the format --quantization names; a dense one may be quantized (see the callers).
void check_expected_quantization(const ModelConfig& config, const std::string& expected, const std::string& where) {
  const std::string_view actual = quant_method_name(config.quantization.method);
  if (config.quantization.quantized() && actual != expected)
    throw Error(ErrorKind::kInvalidArgument, "--quantization " + expected + ", but " + where +
                                                 " says quantization_config.quant_method '" + std::string(actual) +
                                                 "'; drop the flag or pass --quantization " + std::string(actual));
}

QuantizationConfig dummy_quantization(const std::string& method) {
  if (method == "awq") return awq_quantization(128);
  if (method == "gptq") return gptq_quantization(128);
  return fp8_block_quantization();
}

std::string describe_weights(const ModelConfig& c) {
  const QuantizationConfig& q = c.quantization;
  switch (q.method) {
    case QuantMethod::kNone:
      return std::string(dtype_name(c.dtype));
    case QuantMethod::kAwq:
    case QuantMethod::kGptq:
      return std::string(quant_method_name(q.method)) + " int4, group " + std::to_string(q.group_size);
    case QuantMethod::kFp8:
      return std::string("fp8 e4m3, ") + std::to_string(q.block_out) + "x" + std::to_string(q.block_in) + " blocks" +
             (q.online ? ", quantized at load" : "");
  }
  return "?";
}

// qinfer's own cache (the GEMM tuning file): $QINFER_CACHE_DIR, else $XDG_CACHE_HOME/qinfer, else ~/.cache/qinfer;
// empty without any of them.
std::filesystem::path default_qinfer_cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  if (std::string dir = env("QINFER_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return std::filesystem::path(xdg) / "qinfer";
  if (std::string home = env("HOME"); !home.empty()) return std::filesystem::path(home) / ".cache" / "qinfer";
  return {};
}

}  // namespace

void add_model_flags(CLI::App& cmd, ModelFlags& flags) {
  cmd.add_option("--model", flags.model,
                 "Model directory, or a hub repo id (ORG/NAME) taken from the local cache and downloaded first when "
                 "it is not there");
  cmd.add_option("--load-format", flags.load_format,
                 "auto: read safetensors; dummy: deterministic random weights from --config or --preset")
      ->check(CLI::IsMember({"auto", "dummy"}))
      ->capture_default_str();
  cmd.add_option("--preset", flags.preset,
                 "With --load-format dummy: tiny | tiny-untied | 0.6b-shape | 4b-shape | 8b-shape");
  cmd.add_option("--config", flags.config, "With --load-format dummy: a config.json");
  cmd.add_option("--tokenizer", flags.tokenizer, "Directory with tokenizer.json (default: the model's)");
  cmd.add_option("--weight-seed", flags.seed, "With --load-format dummy: weight seed")->capture_default_str();
  cmd.add_option("--quantization,-q", flags.quantization,
                 "Weight format the checkpoint must have: awq | gptq | fp8 (default: whatever its config.json's "
                 "quantization_config says). fp8 on a bf16 checkpoint quantizes it at load (128x128 blocks, as "
                 "Qwen's FP8 checkpoints); with --load-format dummy, the format of the random weights")
      ->check(CLI::IsMember({"awq", "gptq", "fp8"}));
  add_hub_flags(cmd, flags.hub);
}

void add_backend_flags(CLI::App& cmd, BackendOptions& o) {
  cmd.add_option("--device", o.device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd.add_option("--max-model-len,--max-total-tokens", o.max_model_len,
                 "Context length (0: the model's); TGI: --max-total-tokens")
      ->capture_default_str();
  cmd.add_option("--gpu-memory-utilization", o.gpu_memory_utilization, "Fraction of GPU memory to use")
      ->check(CLI::Range(0.05, 0.99))
      ->capture_default_str();
  cmd.add_option("--block-size", o.block_size, "Tokens per KV-cache block")->capture_default_str();
  // A value outside the list is a usage error naming the flag and the accepted values (CLI11's exit code).
  cmd.add_option_function<std::string>(
         "--kv-cache-dtype",
         [&o](const std::string& value) {
           o.kv_cache_dtype = value == "fp8" || value == "fp8_e4m3" ? KvCacheDtype::kFp8E4m3 : KvCacheDtype::kBf16;
         },
         "KV cache storage: auto | bf16 (the model dtype) | fp8 = fp8_e4m3 (E4M3 with a scale per token and KV head: "
         "half the bytes, twice the blocks)")
      ->check(CLI::IsMember({"auto", "bf16", "fp8", "fp8_e4m3"}))
      ->default_str("auto");
  cmd.add_option_function<std::string>(
      "--kv-cache-memory-bytes",
      [&o](const std::string& value) {
        std::optional<int64_t> bytes = parse_byte_size(value);
        if (!bytes || *bytes <= 0)
          throw CLI::ValidationError("--kv-cache-memory-bytes",
                                     "'" + value + "' is not a size in bytes (e.g. 8GiB, 4G, 4e9, 512MiB)");
        o.kv_cache_bytes = *bytes;
      },
      "KV cache size, e.g. 8GiB or 4e9 (CPU default: 2GiB; CUDA default: what --gpu-memory-utilization leaves)");
  cmd.add_option("--tensor-parallel-size,--num-shard", o.tensor_parallel_size,
                 "Ranks to split the model over, Megatron-style (must divide the model's KV heads, attention heads and "
                 "intermediate size): --device cpu runs that many CPU ranks, --device cuda one GPU per rank over NCCL. "
                 "vLLM: -tp, TGI: --num-shard")
      ->capture_default_str();
  cmd.add_flag("--tensor-parallel-same-device", o.tensor_parallel_same_device,
               "CUDA, for tests and diagnostics: run every rank of --tensor-parallel-size on GPU 0 through the "
               "same-device communicator (no NCCL, no CUDA graphs; slower than one rank)");
  cmd.add_option("--threads", o.num_threads, "CPU backend worker threads (0: all cores)")->capture_default_str();
  cmd.add_flag("!--enforce-eager", o.cuda_graphs, "CUDA: launch every kernel one by one (no CUDA graphs for decode)");
  o.gemm_tuning_cache_dir = default_qinfer_cache_dir().string();
  cmd.add_option_function<std::string>(
         "--gemm-tuning-cache",
         [&o](const std::string& value) { o.gemm_tuning_cache_dir = value == "off" ? "" : value; },
         "CUDA: directory of the tuned cuBLASLt choices, kept per GPU, driver and cuBLASLt version so that later "
         "starts skip the timing (off: time them at every start)")
      ->default_str(o.gemm_tuning_cache_dir.empty() ? "off" : o.gemm_tuning_cache_dir);
}

std::optional<std::filesystem::path> find_tokenizer_dir(const ModelFlags& flags) {
  namespace fs = std::filesystem;
  auto has_tokenizer = [](const fs::path& dir) { return fs::exists(dir / "tokenizer.json"); };
  if (!flags.tokenizer.empty()) {
    if (!has_tokenizer(flags.tokenizer))
      throw Error(ErrorKind::kNotFound, "--tokenizer " + flags.tokenizer + ": no tokenizer.json there");
    return fs::path(flags.tokenizer);
  }
  if (!flags.model.empty() && flags.load_format == "auto") {
    fs::path dir = model_dir_from_flags(flags.model, flags.hub);
    return has_tokenizer(dir) ? std::optional(dir) : std::nullopt;
  }
  std::vector<fs::path> roots = {fs::current_path()};
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path p = exe.parent_path(); !ec && !p.empty() && p != p.root_path(); p = p.parent_path()) roots.push_back(p);
  for (const auto& root : roots)
    if (has_tokenizer(root / ".assets" / "qwen3-tokenizer")) return root / ".assets" / "qwen3-tokenizer";
  return std::nullopt;
}

std::shared_ptr<const LoadedModel> load_model_from_flags(const ModelFlags& flags) {
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const LoadedModel> model;
  const bool demo = flags.model.empty() && flags.load_format == "auto";
  if (demo)
    spdlog::warn("no --model given: using the built-in demo model ({} preset, random weights: its text is noise)",
                 kDemoPreset);
  if (flags.load_format == "dummy" || demo) {
    if (!demo && flags.preset.empty() == flags.config.empty())
      throw Error(ErrorKind::kInvalidArgument, "--load-format dummy needs exactly one of --preset or --config");
    ModelConfig config = demo                   ? test_model_preset(kDemoPreset)
                         : flags.preset.empty() ? parse_model_config(read_json_file(flags.config), flags.config)
                                                : test_model_preset(flags.preset);
    if (!flags.quantization.empty()) {
      check_expected_quantization(config, flags.quantization, "the dummy model's config");
      if (!config.quantization.quantized()) config.quantization = dummy_quantization(flags.quantization);
    }
    ThreadPool pool(0);
    ProgressReporter progress("generating dummy weights", config.num_parameters() * 2);  // bf16
    model = std::make_shared<LoadedModel>(make_dummy_model(config, flags.seed, &pool, &progress));
    progress.finish();
  } else {
    const std::filesystem::path dir = model_dir_from_flags(flags.model, flags.hub);
    auto loaded = std::make_shared<LoadedModel>(load_model(dir));
    if (!flags.quantization.empty()) {
      check_expected_quantization(loaded->config, flags.quantization, (dir / "config.json").string());
      if (!loaded->config.quantization.quantized()) {
        if (flags.quantization != "fp8")
          throw Error(ErrorKind::kUnsupported,
                      "--quantization " + flags.quantization + ": " + dir.string() +
                          " is not quantized (config.json has no quantization_config), and qinfer does not quantize "
                          "to " +
                          flags.quantization + " at load (it needs calibration); use an " + flags.quantization +
                          " checkpoint, or --quantization fp8 to quantize this one at load");
        ThreadPool pool(0);
        loaded = std::make_shared<LoadedModel>(quantize_fp8_on_load(*loaded, &pool));
      }
    }
    model = loaded;
  }
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const ModelConfig& c = model->config;
  spdlog::info(
      "model loaded in {:.0f} ms: {} layers, hidden {}, {} q / {} kv heads of {}, vocab {}, {:.2f} B params, weights "
      "{}",
      ms, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size,
      static_cast<double>(c.num_parameters()) / 1e9, describe_weights(c));
  return model;
}

}  // namespace qinfer::cli
