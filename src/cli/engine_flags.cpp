#include "cli/engine_flags.h"

#include "cli/speculative_config.h"
#include "util/error.h"

namespace qinfer::cli {

void add_speculative_config_flag(CLI::App& cmd, std::string& json) {
  cmd.add_option("--speculative-config", json,
                 "Speculative decoding as JSON, as in vLLM: '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                 "\"prompt_lookup_max\": 4, \"prompt_lookup_min\": 1}' or '{\"method\": \"draft_model\", \"model\": "
                 "DIR, \"num_speculative_tokens\": 4}' (also \"disable_by_batch_size\", default 8: off in a step with "
                 "more decoding sequences); greedy outputs stay exactly the same, sampled ones keep their distribution")
      ->check([](const std::string& text) {
        try {
          parse_speculative_config(text);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
}

void add_engine_flags(CLI::App& cmd, BackendOptions& backend, EngineFlags& flags) {
  cmd.add_option("--max-num-seqs,--max-batch-size", backend.max_num_seqs,
                 "Sequences in one batch, at most; TGI: --max-batch-size")
      ->capture_default_str();
  cmd.add_option("--max-num-batched-tokens", backend.max_num_batched_tokens, "Tokens in one step, at most")
      ->capture_default_str();
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", flags.enable_prefix_caching,
               "Reuse KV blocks of shared prompt prefixes")
      ->capture_default_str();
  cmd.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", flags.enable_chunked_prefill,
               "Split long prompts across steps next to decodes")
      ->capture_default_str();
  cmd.add_option("--long-prefill-token-threshold", flags.long_prefill_token_threshold,
                 "Prompts with more tokens left are long; no prefill chunk takes more (0: none; with "
                 "--max-num-partial-prefills > 1: 4% of --max-model-len)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--max-num-partial-prefills", flags.max_num_partial_prefills,
                 "Sequences computing prompt tokens in one step, at most (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--max-long-partial-prefills", flags.max_long_partial_prefills,
                 "Long prompts among them, at most, so short prompts pass long ones (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_flag("--enable-cost-based-chunking,!--no-enable-cost-based-chunking", flags.enable_cost_based_chunking,
               "Shrink prefill chunks after a long cached context by their attention cost, so decodes beside them "
               "keep their pace")
      ->capture_default_str();
  cmd.add_option("--target-itl-ms", flags.target_itl_ms,
                 "Beside running streams, size each step's prefill chunks so the step's predicted time (calibrated "
                 "from measured steps) stays within this many ms; a step without decodes takes the whole token budget "
                 "(0: off; vLLM has no such flag)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd.add_option("--scheduling-policy,--scheduler-policy,--schedule-policy", flags.scheduling_policy,
                 "fcfs | priority | lpm (longest cached prefix first); SGLang: --schedule-policy")
      ->check(CLI::IsMember({"fcfs", "priority", "lpm"}))
      ->capture_default_str();
  add_speculative_config_flag(cmd, flags.speculative_config);
}

EngineOptions engine_options_from_flags(const BackendOptions& backend, const EngineFlags& flags) {
  EngineOptions options;
  options.max_num_seqs = backend.max_num_seqs;
  options.max_num_batched_tokens = backend.max_num_batched_tokens;
  options.enable_prefix_caching = flags.enable_prefix_caching;
  options.enable_chunked_prefill = flags.enable_chunked_prefill;
  options.long_prefill_token_threshold = flags.long_prefill_token_threshold;
  options.max_num_partial_prefills = flags.max_num_partial_prefills;
  options.max_long_partial_prefills = flags.max_long_partial_prefills;
  options.enable_cost_based_chunking = flags.enable_cost_based_chunking;
  options.target_itl_ms = flags.target_itl_ms;
  options.policy = parse_scheduling_policy(flags.scheduling_policy);
  options.speculation = parse_speculative_config(flags.speculative_config);
  return options;
}

}  // namespace qinfer::cli
