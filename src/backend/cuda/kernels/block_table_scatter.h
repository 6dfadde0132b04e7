// Writes a step's new block ids into the device-resident block tables (block_table_slots.h): one run of
// consecutive columns of one row per write.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qinfer::cuda {

// Row `row`, columns [first_column, first_column + count), take block_ids[source, source + count).
struct BlockTableWrite {
  int32_t row = 0;
  int32_t first_column = 0;
  int32_t count = 0;
  int32_t source = 0;
};

struct BlockTableScatterParams {
  int32_t* tables = nullptr;                // [rows, stride]
  int64_t stride = 0;                       // columns per row
  const BlockTableWrite* writes = nullptr;  // [num_writes]
  const int32_t* block_ids = nullptr;       // [sum of the writes' counts]
  int num_writes = 0;
};

// Enqueues the writes on `stream`; nothing when there are none.
void launch_block_table_scatter(const BlockTableScatterParams& params, cudaStream_t stream);

}  // namespace qinfer::cuda
