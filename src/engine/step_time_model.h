// Predicts the wall time of a step from the prefill work in it, calibrated online from the steps the engine timed,
// so that the scheduler can size a prefill chunk to keep the decodes beside it within a target inter-token latency
// whatever the GPU (docs/ENGINE.md, "Latency-targeted chunking").
//
// Model: step_ms = decode_ms + ms_per_cost * prefill_cost, prefill_cost in PrefillCost units (prefill_cost.h),
// decode_ms the time of the step's decodes alone (0 in a step without decodes). decode_ms is an exponential average
// over decode-only steps; ms_per_cost is a ratio of exponential averages over steps with prefill work, sum(step_ms -
// base) / sum(prefill_cost), so that a large chunk weighs more than a short prompt whose time is mostly noise. It
// starts from a conservative prior (a slow GPU) that the first measured chunks replace.
//
// Contract: plain value type, no clock of its own; the caller measures and observes.
#pragma once

namespace qinfer {

struct StepTimeModelOptions {
  // The prior: ms per cost unit before any chunk was measured, and how many cost units of evidence it counts as.
  // 0.05 ms is several times what an H200 takes for Qwen3-4B (≈ 0.014), so the first chunks are small, not late.
  double initial_ms_per_cost = 0.05;
  double prior_cost = 1024;
  // Weight of the past per observation (0 < decay < 1): about 1 / (1 - decay) recent steps count.
  double decay = 0.8;
};

class StepTimeModel {
 public:
  explicit StepTimeModel(StepTimeModelOptions options = {});

  // A step that ran `prefill_cost` units of prompt chunks (0: decodes only) beside decodes (or not) took `ms`.
  void observe(double prefill_cost, bool has_decodes, double ms);

  double decode_ms() const { return decode_ms_; }  // 0 until a decode-only step was observed
  double ms_per_cost() const { return excess_ms_ / cost_; }
  double predict_ms(double prefill_cost, bool has_decodes) const {
    return (has_decodes ? decode_ms_ : 0) + ms_per_cost() * prefill_cost;
  }
  // The most prefill cost a step with decodes may carry to take at most `target_ms` (0 when the decodes alone take it).
  double prefill_budget(double target_ms) const;

 private:
  StepTimeModelOptions options_;
  double decode_ms_ = 0;
  bool decode_observed_ = false;
  double excess_ms_;  // decayed sum of (step ms - the decodes' part) over steps with prefill work, prior included
  double cost_;       // decayed sum of their prefill cost, prior included
};

}  // namespace qinfer
