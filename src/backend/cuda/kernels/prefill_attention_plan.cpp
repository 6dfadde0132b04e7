#include "backend/cuda/kernels/prefill_attention_plan.h"

#include <algorithm>
#include <cstdint>

namespace qinfer::cuda {

namespace {

constexpr int64_t kBlockM = 128;  // query rows per block of the wgmma kernel
constexpr int64_t kBlockN = 128;  // keys per tile
// About two tiles' worth of pipeline fill and store per block.
constexpr int64_t kBlockOverheadTiles = 2;

}  // namespace

int plan_prefill_attention_kv_splits(const PrefillSplitShape& s, int num_sms) {
  if (s.split_rows_capacity <= 0 || s.num_tokens <= 0 || s.num_prefill <= 0 || s.max_q_len <= 0 || num_sms <= 0)
    return 1;
  const int64_t blocks = static_cast<int64_t>(s.num_heads) * s.num_prefill * ((s.max_q_len + kBlockM - 1) / kBlockM);
  const int64_t tiles = (std::max(s.max_context_len, s.max_q_len) + kBlockN - 1) / kBlockN;
  const int64_t max_splits =
      std::min({tiles / kPrefillMinTilesPerSplit, static_cast<int64_t>(s.split_rows_capacity) / s.num_tokens,
                static_cast<int64_t>(kPrefillMaxSplits)});
  // Time in tile periods: waves of blocks times the tiles of a block plus its overhead. 160 blocks on 132 SMs take
  // two waves, the second mostly idle; splitting the keys evens the waves out. A split must win by 1/16, since the
  // merge is not counted.
  const auto cost = [&](int64_t splits) {
    return (blocks * splits + num_sms - 1) / num_sms * ((tiles + splits - 1) / splits + kBlockOverheadTiles);
  };
  int64_t best = 1;
  for (int64_t splits = 2; splits <= max_splits; ++splits)
    if (cost(splits) * 16 < cost(best) * 15) best = splits;
  return static_cast<int>(best);
}

}  // namespace qinfer::cuda
