#include "cli/sampling_flags.h"

#include <string>

#include "util/error.h"

namespace qinfer::cli {

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f, const char* unset_note) {
  const std::string note = std::string(" (default: ") + unset_note + ")";
  cmd.add_option("--temperature", f.temperature, "0 = greedy" + note);
  cmd.add_option("--top-k", f.top_k, "Keep the k most likely tokens (0 = off)" + note);
  cmd.add_option("--top-p", f.top_p, "Nucleus sampling mass" + note);
  cmd.add_option("--min-p", f.min_p, "Drop tokens below min_p x the top probability" + note);
  cmd.add_option("--repetition-penalty", f.repetition_penalty, "HF repetition penalty (1 = off)")
      ->capture_default_str();
  cmd.add_option("--presence-penalty", f.presence_penalty, "OpenAI presence penalty")->capture_default_str();
  cmd.add_option("--frequency-penalty", f.frequency_penalty, "OpenAI frequency penalty")->capture_default_str();
  cmd.add_option("--seed", f.seed, "Sampling seed (same seed, same tokens)")->capture_default_str();
  cmd.add_option("--logprobs", f.logprobs, "Return the top K logprobs per token")->capture_default_str();
}

SamplingParams sampling_params_from_flags(const SamplingFlags& f, const SamplingParams& defaults, int vocab_size) {
  SamplingParams sp = defaults;
  sp.temperature = f.temperature.value_or(defaults.temperature);
  sp.top_p = f.top_p.value_or(defaults.top_p);
  sp.top_k = f.top_k.value_or(defaults.top_k);
  sp.min_p = f.min_p.value_or(defaults.min_p);
  sp.repetition_penalty = f.repetition_penalty;
  sp.presence_penalty = f.presence_penalty;
  sp.frequency_penalty = f.frequency_penalty;
  sp.seed = f.seed;
  sp.num_top_logprobs = f.logprobs;
  if (std::optional<Error> refused = sp.validate(vocab_size)) throw *refused;
  return sp;
}

}  // namespace qinfer::cli
