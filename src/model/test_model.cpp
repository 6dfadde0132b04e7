#include "model/test_model.h"

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

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

}  // namespace

void write_test_model(const std::filesystem::path& dir, const ModelConfig& config, uint64_t seed,
                      const std::optional<std::filesystem::path>& tokenizer_dir, ThreadPool* pool) {
  std::filesystem::create_directories(dir);
  write_json(dir / "config.json", model_config_to_json(config));
  write_json(dir / "generation_config.json", generation_config_to_json(config));

  auto shapes = qwen3_tensor_shapes(config);
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}, {"generator", "qinfer make-test-model"}, {"seed", std::to_string(seed)}};
  uint64_t offset = 0;
  for (const auto& [name, shape] : shapes) {
    uint64_t bytes = element_count(shape) * 2;
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  auto path = dir / "model.safetensors";
  std::ofstream out(path, std::ios::binary);
  uint64_t header_len = header_text.size();
  char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((header_len >> (8 * i)) & 0xff);
  out.write(len_bytes, 8);
  out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
  std::vector<uint16_t> buffer;
  // nlohmann sorts keys, but data offsets follow `shapes` order, so write in that order.
  for (const auto& [name, shape] : shapes) {
    buffer.resize(element_count(shape));
    generate_test_tensor(name, shape, config, seed, buffer, pool);
    out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size() * 2));
  }
  if (!out) throw Error(ErrorKind::kInternal, "cannot write " + path.string());
  out.close();

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
  auto buffers = std::make_shared<std::map<std::string, std::vector<uint16_t>>>();
  std::map<std::string, TensorView> views;
  for (const auto& [name, shape] : qwen3_tensor_shapes(config)) {
    auto& buf = (*buffers)[name];
    buf.resize(element_count(shape));
    generate_test_tensor(name, shape, config, seed, buf, pool);
    TensorView v;
    v.name = name;
    v.dtype = DType::kBF16;
    v.shape = shape;
    v.data = reinterpret_cast<const std::byte*>(buf.data());
    v.num_bytes = buf.size() * 2;
    v.file = "<dummy weights>";
    views[name] = v;
    if (progress) progress->advance(static_cast<int64_t>(v.num_bytes));
  }
  LoadedModel m;
  m.config = config;
  m.weights = bind_qwen3_weights(
      config, [&](const std::string& n) { return views.at(n); },
      [&](const std::string& n) { return views.count(n) != 0; });
  m.storage = buffers;
  return m;
}

}  // namespace qinfer
