#include "model/linear_binding.h"

#include <cmath>
#include <cstring>

#include "util/error.h"
#include "util/half.h"

namespace qinfer {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  TensorView v;
  v.shape = shape;
  return v.shape_string();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Checks of one linear's tensors against what its format needs; every message names the file, the tensor, what was
// expected and what was found.
class LinearBinder {
 public:
  LinearBinder(const TensorSource& source, const std::string& module, int64_t out, int64_t in,
               const QuantizationConfig& q)
      : source_(source), module_(module), out_(out), in_(in), q_(q) {}

  std::string format_name() const { return std::string(quant_method_name(q_.method)); }

  [[noreturn]] void fail(ErrorKind kind, const std::string& where, const std::string& what) const {
    throw Error(kind, where + ": " + what);
  }

  TensorView require(const std::string& suffix, std::initializer_list<DType> dtypes, const std::vector<int64_t>& shape,
                     const std::string& layout) const {
    const std::string name = module_ + "." + suffix;
    if (!source_.contains(name))
      fail(ErrorKind::kFormat, source_.description,
           "tensor '" + name + "' is missing: config.json's quantization_config (" + format_name() + ") stores " +
               module_ + " as " + stored_as() + " (" + suffix + " " + layout + " = " + shape_text(shape) + ")");
    TensorView t = source_.tensor(name);
    bool dtype_ok = false;
    std::string expected_dtypes;
    for (DType d : dtypes) {
      dtype_ok = dtype_ok || t.dtype == d;
      expected_dtypes += (expected_dtypes.empty() ? "" : " or ") + std::string(dtype_name(d));
    }
    if (!dtype_ok)
      fail(ErrorKind::kFormat, t.file.string(),
           "tensor '" + name + "' has dtype " + std::string(dtype_name(t.dtype)) + ", expected " + expected_dtypes +
               " (" + format_name() + " " + suffix + ")");
    if (t.shape != shape)
      fail(ErrorKind::kFormat, t.file.string(),
           "tensor '" + name + "' has shape " + t.shape_string() + ", expected " + shape_text(shape) + " (" +
               format_name() + " " + suffix + " " + layout + " with in = " + std::to_string(in_) +
               ", out = " + std::to_string(out_) + from_config() + ")");
    return t;
  }

  void refuse_present(const std::string& suffix, const std::string& why) const {
    const std::string name = module_ + "." + suffix;
    if (source_.contains(name))
      fail(ErrorKind::kFormat, source_.tensor(name).file.string(), "tensor '" + name + "' " + why);
  }

  // Scales are small; a non-finite or negative one means a broken export, not a model.
  void check_scales(const TensorView& t) const {
    const int64_t n = t.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      float v;
      if (t.dtype == DType::kF32) {
        std::memcpy(&v, t.data + i * 4, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, t.data + i * 2, 2);
        v = t.dtype == DType::kF16 ? fp16_to_float(bits) : bf16_to_float(bits);
      }
      if (!std::isfinite(v) || v < 0)
        fail(ErrorKind::kFormat, t.file.string(),
             "tensor '" + t.name + "' holds " + std::to_string(v) + " at flat index " + std::to_string(i) +
                 ", expected finite non-negative scales");
    }
  }

  AwqWeight awq() const {
    check_linear_packable(source_.description, module_, out_, in_, q_);
    refuse_present("weight", "is present beside the AWQ tensors: a linear is either quantized or dense");
    AwqWeight w;
    w.group_size = q_.group_size;
    const int64_t groups = in_ / q_.group_size;
    w.qweight = require("qweight", {DType::kI32}, {in_, out_ / 8}, "[in, out / 8]");
    w.qzeros = require("qzeros", {DType::kI32}, {groups, out_ / 8}, "[in / group, out / 8]");
    w.scales = require("scales", {DType::kF16}, {groups, out_}, "[in / group, out]");
    check_scales(w.scales);
    return w;
  }

  GptqWeight gptq() const {
    check_linear_packable(source_.description, module_, out_, in_, q_);
    refuse_present("weight", "is present beside the GPTQ tensors: a linear is either quantized or dense");
    GptqWeight w;
    w.group_size = q_.group_size;
    w.zero_offset = q_.gptq_zero_offset;
    w.symmetric = q_.symmetric;
    const int64_t groups = in_ / q_.group_size;
    w.qweight = require("qweight", {DType::kI32}, {in_ / 8, out_}, "[in / 8, out]");
    w.qzeros = require("qzeros", {DType::kI32}, {groups, out_ / 8}, "[in / group, out / 8]");
    w.scales = require("scales", {DType::kF16}, {groups, out_}, "[in / group, out]");
    check_scales(w.scales);
    if (source_.contains(module_ + ".g_idx")) check_trivial_g_idx(require("g_idx", {DType::kI32}, {in_}, "[in]"));
    if (w.symmetric) check_symmetric_zeros(w.qzeros, w.zero_offset);
    return w;
  }

  Fp8BlockWeight fp8() const {
    refuse_present("qweight", "is an int4 tensor, but config.json's quantization_config says fp8");
    Fp8BlockWeight w;
    w.block_out = q_.block_out;
    w.block_in = q_.block_in;
    w.weight = require("weight", {DType::kF8E4M3}, {out_, in_}, "[out, in]");
    w.scale_inv =
        require("weight_scale_inv", {DType::kF32, DType::kBF16, DType::kF16},
                {ceil_div(out_, q_.block_out), ceil_div(in_, q_.block_in)},
                "[ceil(out / " + std::to_string(q_.block_out) + "), ceil(in / " + std::to_string(q_.block_in) + ")]");
    check_scales(w.scale_inv);
    return w;
  }

 private:
  std::string stored_as() const {
    switch (q_.method) {
      case QuantMethod::kAwq:
        return "qweight, qzeros and scales";
      case QuantMethod::kGptq:
        return "qweight, qzeros, scales (and g_idx)";
      case QuantMethod::kFp8:
        return "weight (F8_E4M3) and weight_scale_inv";
      case QuantMethod::kNone:
        break;
    }
    return "weight";
  }

  std::string from_config() const {
    return q_.group_size > 0 ? ", group " + std::to_string(q_.group_size) + " from config.json" : " from config.json";
  }

  // desc_act false: input row k belongs to group k / group_size; any other g_idx reorders rows.
  void check_trivial_g_idx(const TensorView& g_idx) const {
    for (int64_t k = 0; k < in_; ++k) {
      int32_t g;
      std::memcpy(&g, g_idx.data + k * 4, 4);
      if (g != k / q_.group_size)
        fail(ErrorKind::kFormat, g_idx.file.string(),
             "tensor '" + g_idx.name + "' maps input row " + std::to_string(k) + " to group " + std::to_string(g) +
                 ", expected " + std::to_string(k / q_.group_size) +
                 " (desc_act false means g_idx[k] = k / group_size)");
    }
  }

  void check_symmetric_zeros(const TensorView& qzeros, int zero_offset) const {
    const int64_t words = qzeros.num_elements();
    for (int64_t i = 0; i < words; ++i) {
      uint32_t word;
      std::memcpy(&word, qzeros.data + i * 4, 4);
      for (int j = 0; j < 8; ++j) {
        const int zero = static_cast<int>((word >> (4 * j)) & 0xfu) + zero_offset;
        if (zero != 8)
          fail(ErrorKind::kFormat, qzeros.file.string(),
               "tensor '" + qzeros.name + "' holds zero point " + std::to_string(zero) + " for group " +
                   std::to_string(i / (out_ / 8)) + ", column " + std::to_string((i % (out_ / 8)) * 8 + j) +
                   ", expected 8 (quantization_config.sym is true)");
      }
    }
  }

  const TensorSource& source_;
  const std::string& module_;
  int64_t out_, in_;
  const QuantizationConfig& q_;
};

}  // namespace

void check_linear_packable(const std::string& where, const std::string& module, int64_t out, int64_t in,
                           const QuantizationConfig& q) {
  if (q.method != QuantMethod::kAwq && q.method != QuantMethod::kGptq) return;
  auto require = [&](int64_t value, int64_t divisor, const std::string& what) {
    if (value % divisor != 0)
      throw Error(ErrorKind::kUnsupported, where + ": " + module + ": " + what + " = " + std::to_string(value) +
                                               " is not a multiple of " + std::to_string(divisor) + ", which the " +
                                               std::string(quant_method_name(q.method)) + " packing needs");
  };
  require(out, 8, "out_features");
  if (q.method == QuantMethod::kGptq) require(in, 8, "in_features");
  require(in, q.group_size, "in_features (group_size " + std::to_string(q.group_size) + ")");
}

LinearWeight bind_linear(const TensorSource& source, const std::string& module, int64_t out, int64_t in,
                         const QuantizationConfig& quantization, const DenseTensorGetter& get_dense) {
  LinearWeight w;
  w.out_features = out;
  w.in_features = in;
  LinearBinder binder(source, module, out, in, quantization);
  if (!quantization.quantizes(module)) {
    const std::string qweight = module + ".qweight";
    if (!source.contains(module + ".weight") && source.contains(qweight))
      binder.fail(
          ErrorKind::kFormat, source.tensor(qweight).file.string(),
          "tensor '" + qweight + "' is a packed int4 (AWQ/GPTQ) weight, but " +
              (quantization.quantized() ? "quantization_config.modules_to_not_convert keeps " + module + " dense"
                                        : std::string("config.json has no quantization_config")) +
              ": expected '" + module + ".weight' [" + std::to_string(out) + ", " + std::to_string(in) + "]");
    w.data = get_dense(module + ".weight", {out, in});
    return w;
  }
  switch (quantization.method) {
    case QuantMethod::kAwq:
      w.data = binder.awq();
      break;
    case QuantMethod::kGptq:
      w.data = binder.gptq();
      break;
    case QuantMethod::kFp8:
      w.data = binder.fp8();
      break;
    case QuantMethod::kNone:
      break;
  }
  return w;
}

}  // namespace qinfer
