#include "engine/step_time_model.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace qinfer {
namespace {

// Prefill work below this many cost units (a few tokens: a prompt's last token, a tiny chat) is lost in the noise of
// the step's time; such a step counts as decodes only.
constexpr double kMinCostToCalibrate = 16;
// A step may take far longer than its work once (a CUDA graph captured for a new context bucket, a GEMM shape tuned
// on first use); one observation counts at most this many times the current estimate, so such a step does not starve
// the prefill for the next dozen steps, while a lasting change still shows within a few.
constexpr double kOutlierFactor = 4;

}  // namespace

StepTimeModel::StepTimeModel(StepTimeModelOptions options)
    : options_(options), excess_ms_(options.initial_ms_per_cost * options.prior_cost), cost_(options.prior_cost) {
  if (!(options_.initial_ms_per_cost > 0) || !(options_.prior_cost > 0) || !(options_.decay > 0 && options_.decay < 1))
    throw Error(ErrorKind::kInvalidArgument,
                "step time model: initial_ms_per_cost and prior_cost must be > 0 and decay in (0, 1)");
}

void StepTimeModel::observe(double prefill_cost, bool has_decodes, double ms) {
  if (!std::isfinite(ms) || ms < 0 || !std::isfinite(prefill_cost) || prefill_cost < 0) return;
  if (prefill_cost < kMinCostToCalibrate) {
    if (!has_decodes) return;
    double sample = std::max(0.0, ms - ms_per_cost() * prefill_cost);
    if (decode_observed_) sample = std::min(sample, kOutlierFactor * std::max(decode_ms_, 1.0));
    decode_ms_ = decode_observed_ ? options_.decay * decode_ms_ + (1 - options_.decay) * sample : sample;
    decode_observed_ = true;
    return;
  }
  // A step with decodes and a chunk cannot tell the two parts apart; the decodes are taken at their last decode-only
  // time and the chunk gets the rest. Should the decodes have grown meanwhile, the chunk looks dearer and the next one
  // shrinks: the step still meets its target, which is what the model is for.
  const double excess =
      std::min(std::max(0.0, ms - (has_decodes ? decode_ms_ : 0)), kOutlierFactor * ms_per_cost() * prefill_cost);
  excess_ms_ = options_.decay * excess_ms_ + excess;
  cost_ = options_.decay * cost_ + prefill_cost;
}

double StepTimeModel::prefill_budget(double target_ms) const {
  return std::max(0.0, target_ms - decode_ms_) / std::max(ms_per_cost(), 1e-9);
}

}  // namespace qinfer
