// qinfer bench serve: measures any OpenAI-compatible server under load (like `vllm bench serve`) with the load
// generator in src/loadgen, then writes the report as JSON, Markdown and SVG; the Markdown table also goes to stdout.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "loadgen/bench_runner.h"
#include "loadgen/report_json.h"
#include "loadgen/report_markdown.h"
#include "loadgen/report_svg.h"
#include "util/error.h"
#include "util/json_file.h"

namespace qinfer::cli {

namespace {

struct ServeBenchFlags {
  loadgen::BenchOptions bench;
  std::string json_path;
  std::string markdown_path;
  std::string plot_path;
  std::string compare_path;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.good()) throw Error(ErrorKind::kNotFound, "cannot write " + path);
}

void run_bench_serve(ServeBenchFlags f) {
  if (f.bench.api_key.empty())
    if (const char* key = std::getenv("QINFER_API_KEY")) f.bench.api_key = key;
  std::optional<loadgen::BenchReport> baseline;
  if (!f.compare_path.empty()) baseline = loadgen::report_from_json(read_json_file(f.compare_path), f.compare_path);

  loadgen::ProgressDisplay progress(stderr, isatty(fileno(stderr)) != 0);
  const loadgen::BenchReport report = loadgen::run_bench(f.bench, progress);
  const loadgen::BenchReport* before = baseline ? &*baseline : nullptr;
  const std::string markdown = loadgen::markdown_report(report, before);
  if (!f.json_path.empty()) write_file(f.json_path, loadgen::report_to_json(report).dump(2) + "\n");
  if (!f.markdown_path.empty()) write_file(f.markdown_path, markdown);
  if (!f.plot_path.empty()) {
    std::vector<const loadgen::BenchReport*> runs;
    if (before) runs.push_back(before);
    runs.push_back(&report);
    write_file(f.plot_path, loadgen::svg_chart(runs));
  }
  std::fputs(markdown.c_str(), stdout);
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto f = std::make_shared<ServeBenchFlags>();
  loadgen::BenchOptions& o = f->bench;
  CLI::App* cmd = bench.add_subcommand("serve", "Load-test an OpenAI-compatible server (streamed requests)");
  cmd->add_option("--url", o.url, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  cmd->add_option("--concurrency", o.concurrencies, "Requests in flight; a comma list runs a sweep (e.g. 1,8,64)")
      ->delimiter(',');
  cmd->add_option("--request-rate", o.request_rates, "Poisson arrivals per second (comma list: a sweep)")
      ->delimiter(',');
  cmd->add_option("--max-concurrency", o.max_concurrency, "With --request-rate: cap on requests in flight (0: none)")
      ->capture_default_str();
  cmd->add_option("--num-prompts", o.num_prompts, "Requests per level")->capture_default_str();
  cmd->add_option("--dataset", o.dataset, "random, or a JSONL file of {\"prompt\": ..., \"output_len\": N}")
      ->capture_default_str();
  cmd->add_option("--input-len", o.input_len, "Random prompts: tokens (words without --tokenizer)")
      ->capture_default_str();
  cmd->add_option("--output-len", o.output_len, "Output tokens per request (max_tokens with ignore_eos)")
      ->capture_default_str();
  cmd->add_option("--long-requests", o.long_requests,
                  "Mixed workload: long requests per level beside the --num-prompts ones (reported per class)")
      ->capture_default_str();
  cmd->add_option("--long-input-len,--long-prompt-len", o.long_input_len,
                  "Tokens of each long prompt (random, like --input-len)")
      ->capture_default_str();
  cmd->add_option("--long-output-len", o.long_output_len, "Output tokens per long request (0: --output-len)")
      ->capture_default_str();
  cmd->add_option("--long-concurrency", o.long_concurrency,
                  "Long requests in flight at most, outside --concurrency / --request-rate")
      ->capture_default_str();
  cmd->add_option("--long-questions", o.long_questions,
                  "Ask about each long document this many times, one ask after another (document + a different "
                  "question); the later asks, prefix cached, are reported as class long_repeat")
      ->capture_default_str();
  cmd->add_flag("--chat", o.chat, "Use /v1/chat/completions (default: /v1/completions)");
  cmd->add_option_function<std::string>(
      "--extra-body,--extra-request-body",
      [&o](const std::string& text) {
        nlohmann::json extra = nlohmann::json::parse(text, nullptr, false);
        if (!extra.is_object())
          throw CLI::ValidationError("--extra-body", "expected a JSON object, e.g. '{\"response_format\": {...}}'");
        o.extra_body = std::move(extra);
      },
      "JSON object merged into every request body (e.g. a response_format, to load-test structured output); "
      "SGLang: --extra-request-body");
  cmd->add_option("--model", o.model, "Model name sent (default: first id of GET /v1/models)");
  cmd->add_option("--api-key", o.api_key, "Bearer token (default: $QINFER_API_KEY)");
  cmd->add_option("--seed", o.seed, "Seed of prompts and arrivals")->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer_dir,
                  "Directory with tokenizer.json: random prompts of exactly --input-len");
  cmd->add_option("--label", o.label, "Name of this run in reports")->capture_default_str();
  cmd->add_option("--request-timeout", o.request_timeout_seconds, "Seconds one request may take")
      ->capture_default_str();
  cmd->add_option("--metrics-interval", o.metrics_interval_seconds, "Seconds between /metrics samples")
      ->capture_default_str();
  cmd->add_option("--json", f->json_path, "Write the report as JSON (docs/BENCH_SERVE.md)");
  cmd->add_option("--markdown", f->markdown_path, "Write the Markdown tables");
  cmd->add_option("--plot", f->plot_path, "Write an SVG chart: P50 TTFT and TPOT vs output tok/s");
  cmd->add_option("--compare", f->compare_path, "A JSON report of another run, shown beside this one");
  cmd->callback([f] { run_bench_serve(*f); });
}

}  // namespace qinfer::cli
