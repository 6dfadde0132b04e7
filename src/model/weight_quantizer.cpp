#include "model/weight_quantizer.h"

#include <algorithm>
#include <cmath>

#include "model/linear_weight.h"
#include "util/error.h"
#include "util/fp8.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace qinfer {

namespace {

struct DenseMatrix {
  LinearWeight weight;
  int64_t out = 0, in = 0;
};

DenseMatrix as_matrix(const TensorView& dense) {
  QINFER_CHECK(dense.shape.size() == 2 && dtype_is_float(dense.dtype));
  DenseMatrix m;
  m.out = dense.shape[0];
  m.in = dense.shape[1];
  m.weight.out_features = m.out;
  m.weight.in_features = m.in;
  m.weight.data = dense;
  return m;
}

void run(ThreadPool* pool, size_t tasks, const std::function<void(size_t, size_t)>& body) {
  if (pool)
    pool->parallel_for(tasks, body);
  else
    body(0, tasks);
}

int quantize_int4(float w, float scale, int zero) {
  return std::clamp(static_cast<int>(std::nearbyint(w / scale)) + zero, 0, 15);
}

// Calls body(column n, its place in its packed word, group g, the group's group_size weights) for every output
// column and input group of W. Threads take whole packed words (8 columns), so no two write the same int32.
template <typename Body>
void for_each_group(const DenseMatrix& m, int group_size, ThreadPool* pool, const Body& body) {
  run(pool, static_cast<size_t>(m.out / 8), [&](size_t begin, size_t end) {
    std::vector<float> rows(static_cast<size_t>(8 * m.in));  // rows [8c, 8c + 8) of W
    for (int64_t c = static_cast<int64_t>(begin); c < static_cast<int64_t>(end); ++c) {
      dequantize_linear_rows(m.weight, 8 * c, 8, rows.data());
      for (int col = 0; col < 8; ++col)
        for (int64_t g = 0; g < m.in / group_size; ++g)
          body(8 * c + col, col, g, rows.data() + col * m.in + g * group_size);
    }
  });
}

}  // namespace

AwqTensors quantize_awq(const TensorView& dense, int group_size, ThreadPool* pool) {
  const DenseMatrix m = as_matrix(dense);
  QINFER_CHECK(m.out % 8 == 0 && m.in % group_size == 0);
  const int64_t words = m.out / 8, groups = m.in / group_size;
  AwqTensors t;
  t.qweight.assign(static_cast<size_t>(m.in * words), 0);
  t.qzeros.assign(static_cast<size_t>(groups * words), 0);
  t.scales.resize(static_cast<size_t>(groups * m.out));
  for_each_group(m, group_size, pool, [&](int64_t n, int col, int64_t g, const float* group) {
    const int64_t c = n / 8;
    const int shift = 4 * kAwqNibbleOfColumn[static_cast<size_t>(col)];
    const auto [lo, hi] = std::minmax_element(group, group + group_size);
    const uint16_t scale_bits = float_to_fp16(std::max(*hi - *lo, 1e-5f) / 15.0f);
    const float scale = fp16_to_float(scale_bits);
    const int zero = std::clamp(static_cast<int>(std::nearbyint(-*lo / scale)), 0, 15);
    t.scales[static_cast<size_t>(g * m.out + n)] = scale_bits;
    t.qzeros[static_cast<size_t>(g * words + c)] |= static_cast<int32_t>(static_cast<uint32_t>(zero) << shift);
    for (int i = 0; i < group_size; ++i) {
      const int64_t k = g * group_size + i;
      const auto q = static_cast<uint32_t>(quantize_int4(group[i], scale, zero));
      t.qweight[static_cast<size_t>(k * words + c)] |= static_cast<int32_t>(q << shift);
    }
  });
  return t;
}

GptqTensors quantize_gptq_symmetric(const TensorView& dense, int group_size, ThreadPool* pool) {
  const DenseMatrix m = as_matrix(dense);
  QINFER_CHECK(m.out % 8 == 0 && m.in % 8 == 0 && m.in % group_size == 0);
  const int64_t words = m.out / 8, groups = m.in / group_size;
  GptqTensors t;
  t.qweight.assign(static_cast<size_t>(m.in / 8 * m.out), 0);
  t.qzeros.assign(static_cast<size_t>(groups * words), static_cast<int32_t>(0x77777777u));  // zero 8, stored 8 - 1
  t.scales.resize(static_cast<size_t>(groups * m.out));
  t.g_idx.resize(static_cast<size_t>(m.in));
  for (int64_t k = 0; k < m.in; ++k) t.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / group_size);
  for_each_group(m, group_size, pool, [&](int64_t n, int, int64_t g, const float* group) {
    float amax = 0;
    for (int i = 0; i < group_size; ++i) amax = std::max(amax, std::fabs(group[i]));
    const uint16_t scale_bits = float_to_fp16(amax > 0 ? 2.0f * amax / 15.0f : 1.0f);
    const float scale = fp16_to_float(scale_bits);
    t.scales[static_cast<size_t>(g * m.out + n)] = scale_bits;
    for (int i = 0; i < group_size; ++i) {
      const int64_t k = g * group_size + i;
      const auto q = static_cast<uint32_t>(quantize_int4(group[i], scale, 8));
      t.qweight[static_cast<size_t>((k / 8) * m.out + n)] |= static_cast<int32_t>(q << (4 * (k % 8)));
    }
  });
  return t;
}

Fp8BlockTensors quantize_fp8_block(const TensorView& dense, int block_out, int block_in, ThreadPool* pool) {
  const DenseMatrix m = as_matrix(dense);
  const int64_t block_rows = (m.out + block_out - 1) / block_out, block_cols = (m.in + block_in - 1) / block_in;
  Fp8BlockTensors t;
  t.weight.resize(static_cast<size_t>(m.out * m.in));
  t.scale_inv.resize(static_cast<size_t>(block_rows * block_cols));
  run(pool, static_cast<size_t>(block_rows), [&](size_t begin, size_t end) {
    std::vector<float> rows;
    for (int64_t br = static_cast<int64_t>(begin); br < static_cast<int64_t>(end); ++br) {
      const int64_t first = br * block_out, count = std::min<int64_t>(block_out, m.out - first);
      rows.resize(static_cast<size_t>(count * m.in));
      dequantize_linear_rows(m.weight, first, count, rows.data());
      for (int64_t bc = 0; bc < block_cols; ++bc) {
        const int64_t k0 = bc * block_in, k1 = std::min<int64_t>(k0 + block_in, m.in);
        float amax = 0;
        for (int64_t r = 0; r < count; ++r)
          for (int64_t k = k0; k < k1; ++k) amax = std::fmax(amax, std::fabs(rows[static_cast<size_t>(r * m.in + k)]));
        const float inverse = amax > 0 ? kFp8E4m3Max / amax : 0.0f;
        t.scale_inv[static_cast<size_t>(br * block_cols + bc)] = amax / kFp8E4m3Max;
        for (int64_t r = 0; r < count; ++r)
          for (int64_t k = k0; k < k1; ++k)
            t.weight[static_cast<size_t>((first + r) * m.in + k)] =
                float_to_fp8_e4m3(rows[static_cast<size_t>(r * m.in + k)] * inverse);
      }
    }
  });
  return t;
}

}  // namespace qinfer
