#include "backend/cpu/cpu_ops.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/half.h"

namespace qinfer::cpu {

// Compiled for AVX2+FMA and for baseline x86-64; the loader picks the clone the CPU supports.
#define QINFER_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

QINFER_CPU_CLONES float dot(const float* a, const float* b, int n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void load_weight_row(const TensorView& weight, int64_t row, float* out) {
  const int64_t cols = weight.shape.back();
  const size_t offset = static_cast<size_t>(row * cols);
  switch (weight.dtype) {
    case DType::kBF16: {
      const auto* src = reinterpret_cast<const uint16_t*>(weight.data) + offset;
      for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_float(src[i]);
      break;
    }
    case DType::kF16: {
      const auto* src = reinterpret_cast<const uint16_t*>(weight.data) + offset;
      for (int64_t i = 0; i < cols; ++i) out[i] = fp16_to_float(src[i]);
      break;
    }
    case DType::kF32:
      std::memcpy(out, reinterpret_cast<const float*>(weight.data) + offset, static_cast<size_t>(cols) * 4);
      break;
    case DType::kF8E4M3:
    case DType::kI32:
      QINFER_CHECK(false, "dense weights are BF16, F16 or F32 (checked when binding)");
  }
}

namespace {

// Dot product with a bf16 row widened inside the loop: no row buffer, and one summation order for every use.
QINFER_CPU_CLONES float dot_bf16(const float* x, const uint16_t* w, int n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int i = 0; i < n; ++i) acc += x[i] * std::bit_cast<float>(static_cast<uint32_t>(w[i]) << 16);
  return acc;
}

}  // namespace

void linear(ThreadPool& pool, const float* x, int num_tokens, const TensorView& w, float* y) {
  QINFER_CHECK(w.shape.size() == 2);
  const int64_t n_out = w.shape[0];
  const int k = static_cast<int>(w.shape[1]);
  // Rows of the weight are split across threads. A bf16 row is widened inside the dot product for every token, the
  // same code whatever the token count, so a token's result does not depend on how many share the step (speculative
  // verification must reproduce one-token decode bit for bit); other rows are widened once and used for every token.
  if (w.dtype == DType::kBF16) {
    const auto* base = reinterpret_cast<const uint16_t*>(w.data);
    pool.parallel_for(static_cast<size_t>(n_out), [&](size_t begin, size_t end) {
      for (size_t n = begin; n < end; ++n)
        for (int t = 0; t < num_tokens; ++t)
          y[static_cast<size_t>(t) * static_cast<size_t>(n_out) + n] =
              dot_bf16(x + static_cast<size_t>(t) * k, base + n * static_cast<size_t>(k), k);
    });
    return;
  }
  pool.parallel_for(static_cast<size_t>(n_out), [&](size_t begin, size_t end) {
    std::vector<float> row(static_cast<size_t>(k));
    for (size_t n = begin; n < end; ++n) {
      load_weight_row(w, static_cast<int64_t>(n), row.data());
      for (int t = 0; t < num_tokens; ++t)
        y[static_cast<size_t>(t) * static_cast<size_t>(n_out) + n] = dot(x + static_cast<size_t>(t) * k, row.data(), k);
    }
  });
}

void linear(ThreadPool& pool, const float* x, int num_tokens, const LinearWeight& w, float* y) {
  if (w.format() == WeightFormat::kDense) {
    linear(pool, x, num_tokens, w.dense(), y);
    return;
  }
  const int64_t n_out = w.out_features;
  const int k = static_cast<int>(w.in_features);
  pool.parallel_for(static_cast<size_t>(n_out), [&](size_t begin, size_t end) {
    std::vector<float> row(static_cast<size_t>(k));
    for (size_t n = begin; n < end; ++n) {
      dequantize_linear_rows(w, static_cast<int64_t>(n), 1, row.data());
      for (int t = 0; t < num_tokens; ++t)
        y[static_cast<size_t>(t) * static_cast<size_t>(n_out) + n] = dot(x + static_cast<size_t>(t) * k, row.data(), k);
    }
  });
}

void rms_norm(const float* x, const TensorView& weight, int rows, int dim, float eps, float* y) {
  std::vector<float> w(static_cast<size_t>(dim));
  TensorView as_row = weight;
  as_row.shape = {1, dim};
  load_weight_row(as_row, 0, w.data());
  for (int r = 0; r < rows; ++r) {
    const float* in = x + static_cast<size_t>(r) * dim;
    float* out = y + static_cast<size_t>(r) * dim;
    double sum_sq = 0;
    for (int i = 0; i < dim; ++i) sum_sq += static_cast<double>(in[i]) * in[i];
    const float variance = static_cast<float>(sum_sq / dim);
    const float inv_rms = 1.0f / std::sqrt(variance + eps);
    for (int i = 0; i < dim; ++i) out[i] = w[static_cast<size_t>(i)] * (in[i] * inv_rms);
  }
}

void rope_inv_freq(double theta, int head_dim, float* inv_freq) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
}

void apply_rope(float* head, int head_dim, int64_t position, std::span<const float> inv_freq) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[static_cast<size_t>(i)];
    const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
    const float s = static_cast<float>(std::sin(static_cast<double>(angle)));
    const float x1 = head[i], x2 = head[i + half];
    head[i] = x1 * c - x2 * s;
    head[i + half] = x2 * c + x1 * s;
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace qinfer::cpu
