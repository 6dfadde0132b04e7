// Random quantized linear weights for the quantized kernel tests: a weight [n, k] in one checkpoint format ("awq",
// "awq64", "gptq", "fp8"), its values as the format defines them, and its packed copy on the device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/kernels/quantized_gemv.h"
#include "backend/cuda/quantized_weight_layout.h"
#include "gpu_test_util.h"
#include "model/weight_quantizer.h"

namespace qinfer::cuda::testing {

struct QuantizedLinearCase {
  std::vector<uint16_t> dense_bits;
  AwqTensors awq;
  GptqTensors gptq;
  Fp8BlockTensors fp8;
  qinfer::LinearWeight weight;
  std::vector<float> dequantized;  // [n, k]
  PackedQuantizedLinear packed;
  std::unique_ptr<DeviceArray<uint32_t>> words, scales;

  QuantizedWeightView view() const {
    return {packed.format, words->get(), scales->get(), packed.group_size, packed.n, packed.k};
  }
};

// Groups of 128 where k allows, else 64 or 32 ("awq64": 64 where k allows).
std::unique_ptr<QuantizedLinearCase> make_quantized_case(const std::string& format, int n, int k, uint32_t seed);

inline std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The formats the tests cover: AWQ int4 groups of 128 (32 where k needs), of 64, GPTQ, block FP8.
inline const char* const kQuantizedFormats[] = {"awq", "awq64", "gptq", "fp8"};

}  // namespace qinfer::cuda::testing
