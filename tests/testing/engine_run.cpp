#include "testing/engine_run.h"

#include <chrono>

namespace qinfer {

std::vector<std::vector<StreamDelta>> run_to_completion(Engine& engine,
                                                        const std::vector<GenerationRequest>& requests) {
  std::vector<RequestHandle> handles;
  for (const GenerationRequest& request : requests) handles.push_back(engine.submit(request));
  while (engine.step() || engine.has_work()) {
  }
  std::vector<std::vector<StreamDelta>> outputs;
  for (RequestHandle& handle : handles) {
    std::vector<StreamDelta> deltas;
    while (handle.stream->wait_drain(deltas, std::chrono::milliseconds(0))) {
    }
    outputs.push_back(std::move(deltas));
  }
  return outputs;
}

}  // namespace qinfer
