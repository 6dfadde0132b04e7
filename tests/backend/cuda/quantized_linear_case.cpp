#include "quantized_linear_case.h"

#include <cmath>
#include <random>

#include "util/thread_pool.h"

namespace qinfer::cuda::testing {

namespace {

template <typename T>
TensorView view_of(const std::vector<T>& v, DType dtype, std::vector<int64_t> shape) {
  TensorView t;
  t.name = "test.weight";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<const std::byte*>(v.data());
  t.num_bytes = v.size() * sizeof(T);
  return t;
}

int group_for(int k) { return k % 128 == 0 ? 128 : k % 64 == 0 ? 64 : 32; }

}  // namespace

std::unique_ptr<QuantizedLinearCase> make_quantized_case(const std::string& format, int n, int k, uint32_t seed) {
  auto c = std::make_unique<QuantizedLinearCase>();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
  c->dense_bits.resize(static_cast<size_t>(n) * k);
  for (auto& bits : c->dense_bits) bits = float_to_bf16(normal(rng));
  const TensorView dense = view_of(c->dense_bits, DType::kBF16, {n, k});
  const int g = format == "awq64" && k % 64 == 0 ? 64 : group_for(k);
  c->weight.out_features = n;
  c->weight.in_features = k;
  if (format == "awq" || format == "awq64") {
    c->awq = quantize_awq(dense, g, nullptr);
    c->weight.data =
        AwqWeight{view_of(c->awq.qweight, DType::kI32, {k, n / 8}), view_of(c->awq.qzeros, DType::kI32, {k / g, n / 8}),
                  view_of(c->awq.scales, DType::kF16, {k / g, n}), g};
  } else if (format == "gptq") {
    c->gptq = quantize_gptq_symmetric(dense, g, nullptr);
    c->weight.data = GptqWeight{view_of(c->gptq.qweight, DType::kI32, {k / 8, n}),
                                view_of(c->gptq.qzeros, DType::kI32, {k / g, n / 8}),
                                view_of(c->gptq.scales, DType::kF16, {k / g, n}),
                                g,
                                1,
                                true};
  } else {
    c->fp8 = quantize_fp8_block(dense, 128, 128, nullptr);
    c->weight.data =
        Fp8BlockWeight{view_of(c->fp8.weight, DType::kF8E4M3, {n, k}),
                       view_of(c->fp8.scale_inv, DType::kF32, {(n + 127) / 128, (k + 127) / 128}), 128, 128};
  }
  c->dequantized.resize(static_cast<size_t>(n) * k);
  dequantize_linear_rows(c->weight, 0, n, c->dequantized.data());
  ThreadPool pool(2);
  const std::vector<const qinfer::LinearWeight*> parts = {&c->weight};
  c->packed = pack_quantized_linear(parts, pool);
  c->words = std::make_unique<DeviceArray<uint32_t>>(c->packed.weight);
  c->scales = std::make_unique<DeviceArray<uint32_t>>(c->packed.scales);
  return c;
}

}  // namespace qinfer::cuda::testing
