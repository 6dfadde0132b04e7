// fp32 building blocks of the CPU reference forward pass. Weights stay in their checkpoint format (bf16/f16/f32, or
// AWQ / GPTQ / FP8 linears) and are widened or dequantized to fp32 on the fly. Every output element is computed
// independently of the batch size, which keeps the CPU backend batch-invariant.
#pragma once

#include <cstdint>
#include <span>

#include "model/linear_weight.h"
#include "model/safetensors.h"
#include "util/thread_pool.h"

namespace qinfer::cpu {

// Row `row` of a 2-D weight, widened to fp32 into `out` [cols].
void load_weight_row(const TensorView& weight, int64_t row, float* out);

// y[t, n] = sum_k x[t, k] * w[n, k].  x: [num_tokens, K], w: [N, K], y: [num_tokens, N].
void linear(ThreadPool& pool, const float* x, int num_tokens, const TensorView& w, float* y);
// The same over a linear in any checkpoint format: quantized rows are dequantized to fp32 (dequantize_linear_rows),
// one at a time, and the activations stay fp32.
void linear(ThreadPool& pool, const float* x, int num_tokens, const LinearWeight& w, float* y);

// y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * weight, over `dim` elements per row, `rows` rows. x may equal y.
void rms_norm(const float* x, const TensorView& weight, int rows, int dim, float eps, float* y);

// Rotate-half RoPE on one head vector [head_dim] at `position`; inv_freq: [head_dim / 2].
void apply_rope(float* head, int head_dim, int64_t position, std::span<const float> inv_freq);

// inv_freq[i] = theta^(-2i/head_dim), computed in fp32 as transformers does.
void rope_inv_freq(double theta, int head_dim, float* inv_freq);

// out[i] = silu(gate[i]) * up[i].
void swiglu(const float* gate, const float* up, int64_t n, float* out);

float dot(const float* a, const float* b, int n);

}  // namespace qinfer::cpu
