#include "backend/parallel/communicator.h"

namespace qinfer {

size_t comm_dtype_bytes(CommDtype dtype) { return dtype == CommDtype::kF32 ? 4 : 2; }

}  // namespace qinfer
