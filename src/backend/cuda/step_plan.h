// One step's plan, built on the host and uploaded once: the batch's metadata (BatchPlan), with an fp8 cache the groups
// of prefill sequences whose blocks are dequantised for prefill attention (KvGatherPlan), where both landed on the
// device (DeviceBatch), and whether the step replays a captured decode graph.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/batch_plan.h"
#include "backend/cuda/block_table_slots.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kv_gather_plan.h"
#include "backend/cuda/upload_arena.h"

namespace qinfer::cuda {

// Device addresses of a step's metadata (the arrays of BatchPlan and KvGatherPlan of the same names).
struct DeviceBatch {
  const int32_t* token_ids = nullptr;     // [num_tokens]
  const int32_t* positions = nullptr;     // [num_tokens]
  const int64_t* slots = nullptr;         // [num_tokens]
  const int32_t* block_tables = nullptr;  // [max_num_seqs + 1, block_table_stride]: the device-resident tables
  int block_table_stride = 0;
  const int32_t* decode_table_rows = nullptr;  // [num_decode]
  const int32_t* decode_q_rows = nullptr;
  const int32_t* decode_context_lens = nullptr;
  const int32_t* prefill_table_rows = nullptr;  // [num_prefill]
  const int32_t* prefill_q_starts = nullptr;
  const int32_t* prefill_q_lens = nullptr;
  const int32_t* prefill_cached_lens = nullptr;
  // fp8 cache with prefill sequences: the KvGatherPlan's arrays (null otherwise)
  const int32_t* gather_src_blocks = nullptr;             // [gathered blocks]
  const int32_t* gather_valid_tokens = nullptr;           // [gathered blocks]
  const int32_t* gather_tables = nullptr;                 // [num_prefill, gather table_stride]
  const int32_t* gather_table_rows = nullptr;             // [num_prefill]
  const int32_t* sample_rows = nullptr;                   // [num_sampled]
  const DeviceSamplingParams* sampling_params = nullptr;  // [num_sampled]
  const PenaltyEntry* penalties = nullptr;                // [num_penalties]
};

struct StepPlan {
  BatchPlan host;
  const KvGatherPlan* gather = nullptr;  // fp8 cache with prefill sequences, else null
  DeviceBatch device;
  int num_requested_samples = 0;  // sampled positions of the batch (host.sample_rows also counts graph padding)
  bool graph = false;             // replay the decode graph of graph_key
  DecodeGraphKey graph_key;
  int split_context = 0;  // decode attention splits are planned for contexts up to this
};

// The limits a batch must stay within (the backend's options).
struct StepLimits {
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
  int max_model_len = 0;
};

class StepPlanner {
 public:
  // gather_scratch_blocks: the fp8 prefill scratch's capacity in blocks (0 for a bf16 cache). block_tables: device
  // memory of block_table_bytes(limits, kv.block_size) for the device-resident tables, allocated by the caller before
  // the KV pool takes what the budget leaves.
  StepPlanner(const ModelConfig& config, const KvCacheShape& kv, int32_t scratch_block, int gather_scratch_blocks,
              const StepLimits& limits, DeviceBuffer block_tables);

  // Validates the batch (throws Error(kInvalidArgument) for one over the limits or malformed, or whose slots are
  // out of range or repeated), plans it, pads a decode-only step for its captured graph when `graphs` allows, plans
  // the fp8 gather, uploads everything in one transfer on `stream` and writes the block tables' new entries into
  // the device tables. The plan is valid until the next call; the caller must have synchronised the stream since
  // the previous one.
  const StepPlan& plan(const Batch& batch, bool graphs, cudaStream_t stream);

  // Changes whenever an upload moved the device buffers: graphs captured before point to stale addresses.
  uint64_t upload_generation() const { return arena_.generation(); }

 private:
  void upload(const BlockTableUpdate& tables, cudaStream_t stream);

  const ModelConfig& config_;
  KvCacheShape kv_;
  int32_t scratch_block_ = 0;
  int gather_scratch_blocks_ = 0;
  StepLimits limits_;
  UploadArena arena_;
  KvGatherPlanner gather_planner_;
  BlockTableSlots table_slots_;
  DeviceBuffer tables_;  // [table_slots_.num_rows(), table_slots_.stride()] int32, the device-resident block tables
  StepPlan plan_;
};

// Bytes of the device-resident block tables a StepPlanner of these limits allocates.
int64_t block_table_bytes(const StepLimits& limits, int block_size);

// Decode batches are padded to these sizes so that few graphs serve all batch sizes.
int padded_batch_size(int sequences);

}  // namespace qinfer::cuda
