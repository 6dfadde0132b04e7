// Reading the Prometheus text exposition format (what /metrics serves) into samples, and the GPU gauges qinfer
// exports (src/server/server_metrics.cpp): qinfer_gpu_utilization_ratio, qinfer_gpu_memory_used_bytes and
// qinfer_gpu_memory_total_bytes, one series per `gpu` label; and the speculative decoding counters.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer::loadgen {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every sample line (comments and blank lines skipped). Malformed lines are skipped too: a server's exotic metric must
// not stop a benchmark. Label values are unescaped (\\, \", \n).
std::vector<PrometheusSample> parse_prometheus_text(std::string_view text);

// The GPU gauges at one moment: utilisation averaged over GPUs, memory summed over GPUs; absent gauges stay nullopt.
struct GpuReading {
  std::optional<double> utilization_ratio;
  std::optional<double> memory_used_bytes;
  std::optional<double> memory_total_bytes;
};

GpuReading gpu_reading(const std::vector<PrometheusSample>& samples);

// The speculative decoding counters (qinfer_spec_decode_*_total, exported while the server speculates); nullopt when
// the server exports none of them.
struct SpeculationCounters {
  double num_drafts = 0;  // sequence steps that verified proposals
  double draft_tokens = 0;
  double accepted_tokens = 0;
};

std::optional<SpeculationCounters> speculation_counters(const std::vector<PrometheusSample>& samples);

}  // namespace qinfer::loadgen
