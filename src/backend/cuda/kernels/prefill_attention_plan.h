// How many key splits the wgmma prefill attention runs with (prefill_attention.h, PrefillAttentionParams::kv_splits):
// GPU-free, so that its unit tests build without the toolkit.
#pragma once

namespace qinfer::cuda {

// The shape of one prefill attention launch: heads, sequences, the longest chunk and context, the rows of q, and how
// many rows the split buffers hold.
struct PrefillSplitShape {
  int num_heads = 0;
  int num_prefill = 0;
  int max_q_len = 0;
  int max_context_len = 0;  // largest cached + new tokens over the sequences
  int num_tokens = 0;       // rows of q (a split holds this many rows)
  int split_rows_capacity = 0;
};

inline constexpr int kPrefillMinTilesPerSplit = 4;
inline constexpr int kPrefillMaxSplits = 16;

// 1, unless splitting each query block's keys evens out the waves of the grid of num_heads x num_prefill x 128-row
// query blocks (one block per SM) by at least 1/16 of the estimated time — a grid smaller than the GPU, or a few waves
// of which the last is mostly idle — with at least kPrefillMinTilesPerSplit 128-key tiles per split, at most
// kPrefillMaxSplits, and within split_rows_capacity.
int plan_prefill_attention_kv_splits(const PrefillSplitShape& shape, int num_sms);

}  // namespace qinfer::cuda
