#include "model/test_model.h"

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/linear_binding.h"
#include "model/safetensors_writer.h"
#include "model/weight_quantizer.h"
#include "util/error.h"
#include "util/half.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace qinfer {

namespace {

ModelConfig base_config() {
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 151936;
  c.bos_token_ids = {151643};
  c.eos_token_ids = {151645, 151643};
  c.dtype = DType::kBF16;
  c.generation.temperature = 0.7;
  c.generation.top_p = 0.8;
  c.generation.top_k = 20;
  c.generation.min_p = 0.0;
  return c;
}

}  // namespace

std::vector<std::string> test_model_preset_names() {
  return {"tiny", "tiny-untied", "0.6b-shape", "4b-shape", "8b-shape"};
}

ModelConfig test_model_preset(const std::string& name) {
  ModelConfig c = base_config();
  auto set = [&](int hidden, int inter, int layers, int heads, int kv, int head_dim, bool tied, double theta,
                 double eps, int64_t max_pos) {
    c.hidden_size = hidden;
    c.intermediate_size = inter;
    c.num_layers = layers;
    c.num_heads = heads;
    c.num_kv_heads = kv;
    c.head_dim = head_dim;
    c.tie_word_embeddings = tied;
    c.rope_theta = theta;
    c.rms_norm_eps = eps;
    c.max_position_embeddings = max_pos;
  };
  if (name == "tiny")
    set(256, 768, 4, 4, 1, 128, true, 5000000.0, 1e-6, 32768);
  else if (name == "tiny-untied")
    set(192, 512, 3, 6, 2, 64, false, 1000000.0, 1e-5, 32768);
  else if (name == "0.6b-shape")
    set(1024, 3072, 28, 16, 8, 128, true, 1000000.0, 1e-6, 40960);
  else if (name == "4b-shape")
    set(2560, 9728, 36, 32, 8, 128, true, 5000000.0, 1e-6, 262144);
  else if (name == "8b-shape")
    set(4096, 12288, 36, 32, 8, 128, false, 1000000.0, 1e-6, 40960);
  else {
    std::string names;
    for (const auto& n : test_model_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kInvalidArgument, "unknown test-model preset '" + name + "' (known: " + names + ")");
  }
  return c;
}

TestTensorInit test_tensor_init(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& c) {
  // Norm weights around 1 (not exactly 1) so that a misplaced or missing norm changes the output.
  if (shape.size() == 1) return {0.25f, 1.0f};
  // Embedding / lm_head: logits with a standard deviation of about 4, so greedy choices have clear margins.
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight")
    return {static_cast<float>(std::sqrt(3.0) * 4.0 / std::sqrt(static_cast<double>(c.hidden_size))), 0.0f};
  // Linear layers: unit variance gain (std 1/sqrt(in_features)).
  return {static_cast<float>(std::sqrt(3.0) / std::sqrt(static_cast<double>(shape[1]))), 0.0f};
}

uint64_t test_tensor_key(const std::string& name, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h ^ (seed * 0xD1B54A32D192ED03ull);
}

void generate_test_tensor(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& config,
                          uint64_t seed, std::span<uint16_t> out, ThreadPool* pool) {
  TestTensorInit init = test_tensor_init(name, shape, config);
  uint64_t key = test_tensor_key(name, seed);
  auto fill = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = float_to_bf16(test_tensor_value(key, i, init));
  };
  if (pool)
    pool->parallel_for(out.size(), fill);
  else
    fill(0, out.size());
}

namespace {

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw Error(ErrorKind::kInternal, "cannot write " + path.string());
}

struct GeneratedTensor {
  TensorHeader header;
  std::vector<std::byte> bytes;
};

template <typename T>
std::vector<std::byte> as_bytes(const std::vector<T>& values) {
  const auto* begin = reinterpret_cast<const std::byte*>(values.data());
  return {begin, begin + values.size() * sizeof(T)};
}

// "model.layers.0.mlp.down_proj" for "model.layers.0.mlp.down_proj.weight" of a quantized linear; "" otherwise.
std::string quantized_module(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& c) {
  const std::string suffix = ".weight";
  if (shape.size() != 2 || name.rfind("model.layers.", 0) != 0 || name.size() <= suffix.size()) return "";
  const std::string module = name.substr(0, name.size() - suffix.size());
  return c.quantization.quantizes(module) ? module : "";
}

// The checkpoint tensors that stand for the dense tensor `name` [shape]: itself in bf16, or its module's tensors in
// the format of config.quantization. `bytes` are left empty when `with_bytes` is false (header only).
std::vector<GeneratedTensor> checkpoint_tensors(const std::string& name, const std::vector<int64_t>& shape,
                                                const ModelConfig& c, uint64_t seed, bool with_bytes,
                                                ThreadPool* pool) {
  const std::string module = quantized_module(name, shape, c);
  std::vector<std::byte> dense;
  if (with_bytes) {
    dense.resize(element_count(shape) * 2);
    generate_test_tensor(name, shape, c, seed, {reinterpret_cast<uint16_t*>(dense.data()), dense.size() / 2}, pool);
  }
  if (module.empty()) {
    std::vector<GeneratedTensor> one(1);
    one[0] = {{name, DType::kBF16, shape}, std::move(dense)};
    return one;
  }
  TensorView view;
  view.name = name;
  view.dtype = DType::kBF16;
  view.shape = shape;
  view.data = dense.data();
  view.num_bytes = dense.size();
  const QuantizationConfig& q = c.quantization;
  const int64_t out = shape[0], in = shape[1];
  check_linear_packable("test model", module, out, in, q);
  switch (q.method) {
    case QuantMethod::kAwq: {
      AwqTensors t = with_bytes ? quantize_awq(view, q.group_size, pool) : AwqTensors{};
      return {{{module + ".qweight", DType::kI32, {in, out / 8}}, as_bytes(t.qweight)},
              {{module + ".qzeros", DType::kI32, {in / q.group_size, out / 8}}, as_bytes(t.qzeros)},
              {{module + ".scales", DType::kF16, {in / q.group_size, out}}, as_bytes(t.scales)}};
    }
    case QuantMethod::kGptq: {
      GptqTensors t = with_bytes ? quantize_gptq_symmetric(view, q.group_size, pool) : GptqTensors{};
      return {{{module + ".qweight", DType::kI32, {in / 8, out}}, as_bytes(t.qweight)},
              {{module + ".qzeros", DType::kI32, {in / q.group_size, out / 8}}, as_bytes(t.qzeros)},
              {{module + ".scales", DType::kF16, {in / q.group_size, out}}, as_bytes(t.scales)},
              {{module + ".g_idx", DType::kI32, {in}}, as_bytes(t.g_idx)}};
    }
    case QuantMethod::kFp8: {
      Fp8BlockTensors t = with_bytes ? quantize_fp8_block(view, q.block_out, q.block_in, pool) : Fp8BlockTensors{};
      const int64_t rows = (out + q.block_out - 1) / q.block_out, cols = (in + q.block_in - 1) / q.block_in;
      return {{{module + ".weight", DType::kF8E4M3, {out, in}}, as_bytes(t.weight)},
              {{module + ".weight_scale_inv", DType::kF32, {rows, cols}}, as_bytes(t.scale_inv)}};
    }
    case QuantMethod::kNone:
      break;
  }
  return {};
}

}  // namespace

void write_test_model(const std::filesystem::path& dir, const ModelConfig& config, uint64_t seed,
                      const std::optional<std::filesystem::path>& tokenizer_dir, ThreadPool* pool) {
  std::filesystem::create_directories(dir);
  write_json(dir / "config.json", model_config_to_json(config));
  write_json(dir / "generation_config.json", generation_config_to_json(config));

  const auto shapes = qwen3_tensor_shapes(config);
  std::vector<TensorHeader> headers;
  for (const auto& [name, shape] : shapes)
    for (GeneratedTensor& t : checkpoint_tensors(name, shape, config, seed, false, pool))
      headers.push_back(std::move(t.header));
  SafetensorsWriter writer(dir / "model.safetensors", std::move(headers),
                           {{"format", "pt"}, {"generator", "qinfer make-test-model"}, {"seed", std::to_string(seed)}});
  for (const auto& [name, shape] : shapes)
    for (const GeneratedTensor& t : checkpoint_tensors(name, shape, config, seed, true, pool))
      writer.write(t.header.name, t.bytes);
  writer.finish();

  if (tokenizer_dir) {
    bool copied = false;
    for (const char* f :
         {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "vocab.json", "merges.txt"}) {
      auto src = *tokenizer_dir / f;
      if (std::filesystem::exists(src)) {
        std::filesystem::copy_file(src, dir / f, std::filesystem::copy_options::overwrite_existing);
        copied = true;
      }
    }
    if (!copied)
      throw Error(ErrorKind::kNotFound, tokenizer_dir->string() + " has no tokenizer.json or tokenizer_config.json");
  }
}

LoadedModel make_dummy_model(const ModelConfig& config, uint64_t seed, ThreadPool* pool, ProgressReporter* progress) {
  // Dense tensors are generated straight into memory that was never written: a zero-filled vector would be touched
  // first by one thread, and those page faults took most of the time on the 4B (8 GB) on a 16-core GPU host.
  struct Storage {
    std::vector<std::unique_ptr<std::byte[]>> dense;
    std::vector<std::vector<std::byte>> quantized;
  };
  auto storage = std::make_shared<Storage>();
  std::map<std::string, TensorView> views;
  auto add_view = [&](const TensorHeader& header, const std::byte* data, size_t bytes) {
    TensorView v;
    v.name = header.name;
    v.dtype = header.dtype;
    v.shape = header.shape;
    v.data = data;
    v.num_bytes = bytes;
    v.file = "<dummy weights>";
    views[v.name] = v;
  };
  for (const auto& [name, shape] : qwen3_tensor_shapes(config)) {
    if (quantized_module(name, shape, config).empty()) {
      const size_t elements = element_count(shape);
      auto& bytes = storage->dense.emplace_back(std::make_unique_for_overwrite<std::byte[]>(elements * 2));
      generate_test_tensor(name, shape, config, seed, {reinterpret_cast<uint16_t*>(bytes.get()), elements}, pool);
      add_view({name, DType::kBF16, shape}, bytes.get(), elements * 2);
    } else {
      for (GeneratedTensor& t : checkpoint_tensors(name, shape, config, seed, true, pool)) {
        const std::vector<std::byte>& bytes = storage->quantized.emplace_back(std::move(t.bytes));
        add_view(t.header, bytes.data(), bytes.size());
      }
    }
    if (progress) progress->advance(static_cast<int64_t>(element_count(shape) * 2));  // its bf16 source
  }
  LoadedModel m;
  m.config = config;
  TensorSource source{"<dummy weights>", [&](const std::string& n) { return views.at(n); },
                      [&](const std::string& n) { return views.count(n) != 0; },
                      [&] {
                        std::vector<std::string> names;
                        for (const auto& [n, v] : views) names.push_back(n);
                        return names;
                      }};
  m.weights = bind_qwen3_weights(config, source);
  m.storage = storage;
  return m;
}

}  // namespace qinfer
