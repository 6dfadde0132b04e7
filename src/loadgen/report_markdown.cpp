#include "loadgen/report_markdown.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace qinfer::loadgen {

namespace {

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string null_or(const std::optional<double>& value, const char* pattern, double scale = 1) {
  return value ? format(pattern, *value * scale) : "–";
}

// "mean / P50 / P90 / P99" in ms.
std::string distribution_cell(const std::optional<Distribution>& d) {
  if (!d) return "–";
  return format("%.1f", d->mean) + " / " + format("%.1f", d->p50) + " / " + format("%.1f", d->p90) + " / " +
         format("%.1f", d->p99);
}

std::optional<double> field(const std::optional<Distribution>& d, double Distribution::*member) {
  if (!d) return std::nullopt;
  return (*d).*member;
}

std::string errors_cell(const LevelResult& level) {
  if (level.errors.empty()) return "0";
  std::string cell;
  for (const auto& [kind, count] : level.errors) {
    if (!cell.empty()) cell += ", ";
    cell += kind + " " + std::to_string(count);
  }
  return cell;
}

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

void append_row(std::string& out, std::initializer_list<std::string_view> cells) {
  out += "|";
  for (std::string_view cell : cells) (out += " ").append(cell) += " |";
  out += "\n";
}

// Mixed workloads: how the short requests fare beside the long ones.
void append_class_table(std::string& out, const BenchReport& r) {
  out += "Per class: " + std::to_string(r.long_requests) + " long requests of " + std::to_string(r.long_input_len) +
         " / " + std::to_string(r.long_output_len) + " tokens per level, at most " +
         std::to_string(r.long_concurrency) + " in flight, beside the others. TTFT as P50 / P90 / P99 ms, ITL as " +
         "P50 / P99 ms.\n\n";
  append_row(out, {"level", "class", "ok", "output tok/s", "TTFT", "ITL"});
  append_row(out, {"---", "---", "---:", "---:", "---:", "---:"});
  for (const LevelResult& l : r.levels)
    for (const auto& [name, c] : l.classes) {
      const std::string ttft = c.ttft_ms ? format("%.1f", c.ttft_ms->p50) + " / " + format("%.1f", c.ttft_ms->p90) +
                                               " / " + format("%.1f", c.ttft_ms->p99)
                                         : "–";
      const std::string itl = c.itl_ms ? format("%.1f", c.itl_ms->p50) + " / " + format("%.1f", c.itl_ms->p99) : "–";
      append_row(out, {level_name(l), name, std::to_string(c.completed) + "/" + std::to_string(c.num_requests),
                       format("%.1f", c.output_throughput), ttft, itl});
    }
  out += "\n";
}

void append_run_table(std::string& out, const BenchReport& r) {
  out += "### " + r.label + "\n\n";
  out += "`" + r.endpoint + "` at " + r.url + ", model `" + r.model + "`, dataset " + r.dataset + ", input " +
         std::to_string(r.input_len) + " / output " + std::to_string(r.output_len) + " tokens, " +
         std::to_string(r.num_prompts) + " requests per level, started " + r.started_at + ".\n\n";
  out += "Latencies in ms as mean / P50 / P90 / P99.\n\n";
  append_row(out, {"level", "ok", "errors", "req/s", "output tok/s", "total tok/s", "TTFT", "TPOT", "ITL", "E2E",
                   "GPU util mean", "GPU mem peak GiB"});
  append_row(out, {"---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"});
  for (const LevelResult& l : r.levels)
    append_row(
        out, {level_name(l), std::to_string(l.completed) + "/" + std::to_string(l.num_requests), errors_cell(l),
              format("%.2f", l.request_throughput), format("%.1f", l.output_throughput),
              format("%.1f", l.total_token_throughput), distribution_cell(l.ttft_ms), distribution_cell(l.tpot_ms),
              distribution_cell(l.itl_ms), distribution_cell(l.e2e_ms), null_or(l.gpu.utilization_mean, "%.0f %%", 100),
              null_or(l.gpu.memory_used_peak_bytes, "%.2f", 1 / kBytesPerGiB)});
  out += "\n";
  for (const LevelResult& l : r.levels) {
    if (!l.speculation) continue;
    const SpeculationSummary& s = *l.speculation;
    out += "Speculative decoding at " + level_name(l) + ": " + std::to_string(s.accepted_tokens) + " of " +
           std::to_string(s.draft_tokens) + " proposed tokens accepted (" + format("%.1f", 100 * s.acceptance_rate()) +
           " %), mean accepted length " + format("%.2f", s.mean_accepted_length()) + " over " +
           std::to_string(s.num_drafts) + " verifying steps.\n\n";
  }
  if (std::any_of(r.levels.begin(), r.levels.end(), [](const LevelResult& l) { return !l.classes.empty(); }))
    append_class_table(out, r);
}

bool same_level(const LevelResult& a, const LevelResult& b) {
  return a.concurrency == b.concurrency && a.request_rate == b.request_rate;
}

void append_comparison(std::string& out, const BenchReport& before, const BenchReport& after) {
  out += "### " + before.label + " vs " + after.label + "\n\n";
  append_row(out, {"level", "label", "TTFT P50 ms", "TTFT P90 ms", "output tok/s", "total tok/s", "errors",
                   "GPU mem peak GiB", "GPU util mean"});
  append_row(out, {"---", "---", "---:", "---:", "---:", "---:", "---", "---:", "---:"});
  std::vector<const LevelResult*> order;
  for (const BenchReport* r : {&before, &after})
    for (const LevelResult& l : r->levels)
      if (std::none_of(order.begin(), order.end(), [&l](const LevelResult* o) { return same_level(*o, l); }))
        order.push_back(&l);
  for (const LevelResult* key : order)
    for (const BenchReport* r : {&before, &after})
      for (const LevelResult& l : r->levels)
        if (same_level(l, *key))
          append_row(out, {level_name(l), r->label, null_or(field(l.ttft_ms, &Distribution::p50), "%.1f"),
                           null_or(field(l.ttft_ms, &Distribution::p90), "%.1f"), format("%.1f", l.output_throughput),
                           format("%.1f", l.total_token_throughput), errors_cell(l),
                           null_or(l.gpu.memory_used_peak_bytes, "%.2f", 1 / kBytesPerGiB),
                           null_or(l.gpu.utilization_mean, "%.0f %%", 100)});
  out += "\n";
  append_row(out, {"label", "max concurrency without errors", "best output tok/s", "GPU mem peak GiB",
                   "GPU util mean (over levels)"});
  append_row(out, {"---", "---:", "---:", "---:", "---:"});
  for (const BenchReport* r : {&before, &after}) {
    double best = 0;
    std::optional<double> peak_memory;
    double util_sum = 0;
    int util_levels = 0;
    for (const LevelResult& l : r->levels) {
      best = std::max(best, l.output_throughput);
      if (l.gpu.memory_used_peak_bytes) peak_memory = std::max(peak_memory.value_or(0), *l.gpu.memory_used_peak_bytes);
      if (l.gpu.utilization_mean) {
        util_sum += *l.gpu.utilization_mean;
        ++util_levels;
      }
    }
    const std::optional<int> max_ok = max_concurrency_without_errors(*r);
    append_row(out, {r->label, max_ok ? std::to_string(*max_ok) : "–", format("%.1f", best),
                     null_or(peak_memory, "%.2f", 1 / kBytesPerGiB),
                     util_levels > 0 ? format("%.0f %%", 100 * util_sum / util_levels) : "–"});
  }
  out += "\n";
}

}  // namespace

std::string markdown_report(const BenchReport& report, const BenchReport* baseline) {
  std::string out = "## qinfer bench serve\n\n";
  if (baseline) append_run_table(out, *baseline);
  append_run_table(out, report);
  if (baseline) append_comparison(out, *baseline, report);
  return out;
}

}  // namespace qinfer::loadgen
