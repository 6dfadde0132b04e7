#include "model/online_quantization.h"

#include "model/weight_quantizer.h"
#include "util/error.h"

namespace qinfer {

namespace {

struct OnlineFp8Storage {
  std::shared_ptr<const void> source;  // the dense checkpoint: embeddings and norms still point into it
  std::vector<Fp8BlockTensors> linears;
};

}  // namespace

LoadedModel quantize_fp8_on_load(const LoadedModel& model, ThreadPool* pool) {
  QINFER_CHECK(!has_quantized_linears(model.weights));
  LoadedModel out = model;
  out.config.quantization = fp8_block_quantization();
  out.config.quantization.online = true;
  const QuantizationConfig& q = out.config.quantization;
  auto storage = std::make_shared<OnlineFp8Storage>();
  storage->source = model.storage;
  storage->linears.reserve(out.weights.layers.size() * 7);  // views point into these vectors: no reallocation
  for (size_t l = 0; l < out.weights.layers.size(); ++l) {
    for (auto& [module, linear] : layer_linears(out.weights.layers[l], static_cast<int>(l))) {
      const TensorView dense = linear->dense();
      Fp8BlockTensors& t = storage->linears.emplace_back(quantize_fp8_block(dense, q.block_out, q.block_in, pool));
      std::string origin(1, '<');
      origin.append(dense.file.string()).append(", quantized to fp8 at load>");
      Fp8BlockWeight w;
      w.block_out = q.block_out;
      w.block_in = q.block_in;
      w.weight.name = module + ".weight";
      w.weight.dtype = DType::kF8E4M3;
      w.weight.shape = {linear->out_features, linear->in_features};
      w.weight.data = reinterpret_cast<const std::byte*>(t.weight.data());
      w.weight.num_bytes = t.weight.size();
      w.weight.file = origin;
      w.scale_inv.name = module + ".weight_scale_inv";
      w.scale_inv.dtype = DType::kF32;
      w.scale_inv.shape = {(linear->out_features + q.block_out - 1) / q.block_out,
                           (linear->in_features + q.block_in - 1) / q.block_in};
      w.scale_inv.data = reinterpret_cast<const std::byte*>(t.scale_inv.data());
      w.scale_inv.num_bytes = t.scale_inv.size() * sizeof(float);
      w.scale_inv.file = origin;
      linear->data = w;
    }
  }
  out.storage = storage;
  return out;
}

}  // namespace qinfer
