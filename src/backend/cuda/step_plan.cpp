#include "backend/cuda/step_plan.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/block_table_scatter.h"
#include "util/error.h"

namespace qinfer::cuda {

int padded_batch_size(int sequences) {
  return sequences <= 8 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(sequences))) : (sequences + 7) / 8 * 8;
}

namespace {

int max_blocks_per_sequence(const StepLimits& limits, int block_size) {
  return (limits.max_model_len + block_size - 1) / block_size;
}

}  // namespace

int64_t block_table_bytes(const StepLimits& limits, int block_size) {
  return BlockTableSlots::device_bytes(limits.max_num_seqs, max_blocks_per_sequence(limits, block_size));
}

StepPlanner::StepPlanner(const ModelConfig& config, const KvCacheShape& kv, int32_t scratch_block,
                         int gather_scratch_blocks, const StepLimits& limits, DeviceBuffer block_tables)
    : config_(config),
      kv_(kv),
      scratch_block_(scratch_block),
      gather_scratch_blocks_(gather_scratch_blocks),
      limits_(limits),
      table_slots_(limits.max_num_seqs, max_blocks_per_sequence(limits, kv.block_size)),
      tables_(std::move(block_tables)) {
  QINFER_CHECK(tables_.bytes() == static_cast<size_t>(block_table_bytes(limits, kv.block_size)));
  // Every entry is a valid block id from the start (0; the kernels read only a sequence's own blocks), and the
  // padding rows' table is all scratch blocks.
  CUDA_CHECK(cudaMemset(tables_.data(), 0, tables_.bytes()));
  const std::vector<int32_t> scratch_table(static_cast<size_t>(table_slots_.stride()), scratch_block_);
  CUDA_CHECK(
      cudaMemcpy(tables_.as<int32_t>() + static_cast<int64_t>(table_slots_.scratch_row()) * table_slots_.stride(),
                 scratch_table.data(), scratch_table.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  // Both may still run when they return, and the steps' stream does not wait for the default stream.
  CUDA_CHECK(cudaDeviceSynchronize());
}

const StepPlan& StepPlanner::plan(const Batch& batch, bool graphs, cudaStream_t stream) {
  validate_batch(batch, config_, kv_, limits_.max_model_len, /*multi_position_sampling=*/true);
  if (static_cast<int64_t>(batch.token_ids.size()) > limits_.max_num_batched_tokens ||
      static_cast<int>(batch.sequences.size()) > limits_.max_num_seqs)
    throw Error(ErrorKind::kInvalidArgument, "invalid batch: " + std::to_string(batch.token_ids.size()) +
                                                 " tokens in " + std::to_string(batch.sequences.size()) +
                                                 " sequences exceed max_num_batched_tokens " +
                                                 std::to_string(limits_.max_num_batched_tokens) + " / max_num_seqs " +
                                                 std::to_string(limits_.max_num_seqs));
  table_slots_.check_slots(batch);
  StepPlan& p = plan_;
  p.host = plan_batch(batch, kv_.block_size, config_.vocab_size);
  p.num_requested_samples = static_cast<int>(p.host.sample_rows.size());
  p.split_context = p.host.max_decode_context;
  // Decode-only steps replay a captured graph: padded batch, block tables and attention splits planned for the
  // power-of-two bucket of the longest context, so one graph serves many steps. So do steps of equal chunks
  // (verification, a draft catching up), over a bf16 cache (an fp8 cache's prefill path plans a gather from the
  // contexts).
  const GraphableChunks chunks = kv_.dtype == KvCacheDtype::kBf16 ? graphable_chunks(p.host) : GraphableChunks{};
  p.graph = graphs && (is_graphable_decode(p.host) || chunks.positions > 0);
  if (p.graph) {
    DecodeGraphKey& key = p.graph_key;
    int max_context = p.host.max_decode_context;
    for (size_t s = 0; s < p.host.prefill_q_lens.size(); ++s)
      max_context = std::max(max_context, p.host.prefill_cached_lens[s] + p.host.prefill_q_lens[s]);
    const int sequences =
        chunks.positions > 0 ? static_cast<int>(p.host.prefill_q_lens.size()) : p.num_requested_samples;
    key.padded_sequences = padded_batch_size(sequences);
    key.positions_per_sequence = chunks.positions > 0 ? chunks.positions : 1;
    key.all_positions_sampled = chunks.all_sampled;
    key.context_bucket = static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(64, max_context))));
    key.block_table_stride = table_slots_.stride();
    key.samples = !p.host.constrained();  // constrained steps sample after the graph, once their masks are ready
    // The padded sampled rows must fit the logits buffer (max_num_seqs rows) in one chunk.
    const int padded_tokens = key.padded_sequences * key.positions_per_sequence;
    const int padded_rows = chunks.all_sampled ? padded_tokens : key.padded_sequences;
    p.graph = padded_rows <= limits_.max_num_seqs && padded_tokens <= limits_.max_num_batched_tokens;
  }
  if (p.graph) {
    if (p.graph_key.positions_per_sequence > 1)
      pad_chunk_plan(p.host, p.graph_key.padded_sequences, scratch_block_, kv_.block_size,
                     p.graph_key.all_positions_sampled);
    else
      pad_decode_plan(p.host, p.graph_key.padded_sequences, scratch_block_, kv_.block_size);
    p.split_context = p.graph_key.context_bucket;
  }
  p.gather = kv_.dtype == KvCacheDtype::kFp8E4m3 && !p.host.prefill_q_lens.empty()
                 ? &gather_planner_.plan(p.host, kv_.block_size, gather_scratch_blocks_)
                 : nullptr;
  // Last, once nothing can refuse the batch: the slots' state then says what the device tables hold.
  const BlockTableUpdate& tables = table_slots_.update(batch, kv_.block_size);
  map_table_rows(p.host, tables.rows, table_slots_.scratch_row());
  upload(tables, stream);
  return p;
}

void StepPlanner::upload(const BlockTableUpdate& tables, cudaStream_t stream) {
  const BatchPlan& h = plan_.host;
  const KvGatherPlan* gather = plan_.gather;
  arena_.begin();
  const size_t token_ids = arena_.add(h.token_ids), positions = arena_.add(h.positions), slots = arena_.add(h.slots),
               decode_rows = arena_.add(h.decode_table_rows), decode_q = arena_.add(h.decode_q_rows),
               decode_context = arena_.add(h.decode_context_lens), prefill_rows = arena_.add(h.prefill_table_rows),
               prefill_start = arena_.add(h.prefill_q_starts), prefill_len = arena_.add(h.prefill_q_lens),
               prefill_cached = arena_.add(h.prefill_cached_lens), sample = arena_.add(h.sample_rows),
               params = arena_.add(h.sampling_params), penalties = arena_.add_parts(h.penalty_parts);
  size_t src_blocks = 0, valid_tokens = 0, gather_tables = 0, gather_rows = 0;
  if (gather != nullptr) {
    src_blocks = arena_.add(gather->src_blocks);
    valid_tokens = arena_.add(gather->valid_tokens);
    gather_tables = arena_.add(gather->scratch_tables);
    gather_rows = arena_.add(gather->scratch_table_rows);
  }
  // After every array a captured graph reads: their addresses stay those of its capture whatever these add.
  const size_t table_writes = arena_.add(tables.writes), table_ids = arena_.add(tables.block_ids);
  arena_.upload(stream);
  launch_block_table_scatter(
      {tables_.as<int32_t>(), table_slots_.stride(), arena_.device<BlockTableWrite>(table_writes),
       arena_.device<int32_t>(table_ids), static_cast<int>(tables.writes.size())},
      stream);
  const auto ints = [&](size_t handle) { return arena_.device<int32_t>(handle); };
  const auto gathered = [&](size_t handle) { return gather != nullptr ? ints(handle) : nullptr; };
  DeviceBatch& d = plan_.device;
  d.token_ids = ints(token_ids);
  d.positions = ints(positions);
  d.slots = arena_.device<int64_t>(slots);
  d.block_tables = tables_.as<int32_t>();
  d.block_table_stride = table_slots_.stride();
  d.decode_table_rows = ints(decode_rows);
  d.decode_q_rows = ints(decode_q);
  d.decode_context_lens = ints(decode_context);
  d.prefill_table_rows = ints(prefill_rows);
  d.prefill_q_starts = ints(prefill_start);
  d.prefill_q_lens = ints(prefill_len);
  d.prefill_cached_lens = ints(prefill_cached);
  d.gather_src_blocks = gathered(src_blocks);
  d.gather_valid_tokens = gathered(valid_tokens);
  d.gather_tables = gathered(gather_tables);
  d.gather_table_rows = gathered(gather_rows);
  d.sample_rows = ints(sample);
  d.sampling_params = arena_.device<DeviceSamplingParams>(params);
  d.penalties = arena_.device<PenaltyEntry>(penalties);
}

}  // namespace qinfer::cuda
