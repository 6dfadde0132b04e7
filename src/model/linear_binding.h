// Binding one linear layer's tensors in the format config.json's quantization_config gives it, with every tensor's
// presence, dtype and shape checked (and the cheap value checks: finite scales, trivial g_idx, symmetric zeros).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/linear_weight.h"
#include "model/quantization_config.h"

namespace qinfer {

// Where tensors come from: a checkpoint, or buffers generated in memory.
struct TensorSource {
  std::string description;  // for messages: the checkpoint directory, "<dummy weights>"
  std::function<TensorView(const std::string&)> tensor;
  std::function<bool(const std::string&)> contains;
  std::function<std::vector<std::string>()> names;  // every tensor it holds
};

// Returns the checked dense tensor `name` of `shape` (the caller enforces one float dtype for the whole model).
using DenseTensorGetter = std::function<TensorView(const std::string& name, const std::vector<int64_t>& shape)>;

// Binds `module` ("model.layers.0.self_attn.q_proj") of W [out, in]: `module.weight` when the module is dense, else
// the format's tensors. Throws Error(kFormat) naming the file, the tensor, expected and actual for a missing,
// mistyped or mis-shaped tensor, a dense weight beside quantized ones, or quantized tensors the config does not
// announce; Error(kUnsupported) for model shapes the format cannot pack (out not a multiple of 8, in not a multiple
// of the group).
LinearWeight bind_linear(const TensorSource& source, const std::string& module, int64_t out, int64_t in,
                         const QuantizationConfig& quantization, const DenseTensorGetter& get_dense);

// Throws Error(kUnsupported) naming `module` and `where` when W [out, in] cannot be stored in `quantization`'s format:
// AWQ / GPTQ need out % 8 == 0 and in % group_size == 0 (GPTQ also in % 8 == 0); FP8 blocks take any shape.
void check_linear_packable(const std::string& where, const std::string& module, int64_t out, int64_t in,
                           const QuantizationConfig& quantization);

}  // namespace qinfer
