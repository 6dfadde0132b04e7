// Report writers: JSON round trip and documented keys, Markdown rows, SVG well-formed with one line per label.
#include <gtest/gtest.h>

#include <regex>

#include "loadgen/report_json.h"
#include "loadgen/report_markdown.h"
#include "loadgen/report_svg.h"
#include "util/error.h"

namespace qinfer::loadgen {
namespace {

BenchReport sample_report(const std::string& label, double speed) {
  BenchReport r;
  r.label = label;
  r.url = "http://127.0.0.1:8000";
  r.endpoint = "/v1/completions";
  r.model = "tiny";
  r.dataset = "random";
  r.input_len = 16;
  r.output_len = 8;
  r.num_prompts = 8;
  r.seed = 3;
  r.started_at = "2026-11-29T22:00:00Z";
  for (int c : {1, 4}) {
    LevelResult l;
    l.concurrency = c;
    l.num_requests = 8;
    l.completed = c == 1 ? 8 : 7;
    l.failed = 8 - l.completed;
    if (l.failed) {
      l.errors["http_429"] = l.failed;
      l.error_samples["http_429"] = "queue full";
    }
    l.duration_s = 2;
    l.output_throughput = speed * c;
    l.request_throughput = 4;
    l.total_token_throughput = speed * c * 3;
    l.total_input_tokens = 128;
    l.total_output_tokens = 64;
    l.ttft_ms = Distribution{8, 10.0 * c, 9.0 * c, 12.0 * c, 13.0 * c};
    l.tpot_ms = Distribution{8, 2, 2, 3, 4};
    l.e2e_ms = Distribution{8, 30, 29, 35, 40};
    if (c == 4) {
      l.gpu = GpuSummary{.samples = 4,
                         .utilization_mean = 0.5,
                         .utilization_max = 0.9,
                         .memory_used_peak_bytes = 2e9,
                         .memory_used_mean_bytes = 1.5e9,
                         .memory_total_bytes = 8e9};
    }
    l.peak_in_flight = c;
    r.levels.push_back(l);
  }
  return r;
}

TEST(ReportJson, RoundTripsAndKeepsNulls) {
  const BenchReport report = sample_report("default", 100);
  const nlohmann::json json = report_to_json(report);
  EXPECT_EQ(json["schema"], kBenchServeSchema);
  for (const char* key : {"label", "url", "endpoint", "model", "dataset", "input_len", "output_len", "num_prompts",
                          "seed", "started_at", "levels"})
    EXPECT_TRUE(json.contains(key)) << key;
  const nlohmann::json& level = json["levels"][0];
  for (const char* key : {"name",
                          "concurrency",
                          "request_rate",
                          "num_requests",
                          "completed",
                          "failed",
                          "duration_s",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "total_input_tokens",
                          "total_output_tokens",
                          "ttft_ms",
                          "tpot_ms",
                          "itl_ms",
                          "e2e_ms",
                          "errors",
                          "error_samples",
                          "gpu",
                          "peak_in_flight",
                          "client_cpu_seconds"})
    EXPECT_TRUE(level.contains(key)) << key;
  EXPECT_TRUE(level["itl_ms"].is_null());
  EXPECT_TRUE(level["request_rate"].is_null());
  EXPECT_TRUE(level["gpu"]["utilization_mean"].is_null());
  EXPECT_EQ(json["levels"][1]["gpu"]["memory_used_peak_bytes"], 2e9);
  for (const char* key : {"count", "mean", "p50", "p90", "p99"}) EXPECT_TRUE(level["ttft_ms"].contains(key)) << key;

  const BenchReport back = report_from_json(nlohmann::json::parse(json.dump()), "x.json");
  EXPECT_EQ(report_to_json(back), json);
}

BenchReport mixed_report() {
  BenchReport r = sample_report("mixed", 100);
  r.long_requests = 2;
  r.long_input_len = 4096;
  r.long_output_len = 8;
  r.long_concurrency = 1;
  for (LevelResult& l : r.levels) {
    ClassResult& chats = l.classes[kShortClass];
    chats.num_requests = chats.completed = 8;
    chats.output_throughput = 30;
    chats.ttft_ms = Distribution{8, 20, 18, 25, 31};
    chats.itl_ms = Distribution{56, 5, 4, 6, 9.5};
    ClassResult& documents = l.classes[kLongClass];
    documents.num_requests = documents.completed = 2;
    documents.output_throughput = 4;
    documents.ttft_ms = Distribution{2, 900, 880, 950, 990};
  }
  return r;
}

TEST(ReportJson, MixedWorkloadClassesRoundTrip) {
  const nlohmann::json json = report_to_json(mixed_report());
  EXPECT_EQ(json["long_requests"], 2);
  EXPECT_EQ(json["long_input_len"], 4096);
  const nlohmann::json& classes = json["levels"][0]["classes"];
  EXPECT_EQ(classes["short"]["ttft_ms"]["p99"], 31);
  EXPECT_EQ(classes["short"]["itl_ms"]["p50"], 4);
  EXPECT_EQ(classes["long"]["num_requests"], 2);
  EXPECT_TRUE(classes["long"]["itl_ms"].is_null());
  EXPECT_EQ(report_to_json(report_from_json(nlohmann::json::parse(json.dump()), "x.json")), json);
  EXPECT_TRUE(report_to_json(sample_report("plain", 1))["levels"][0]["classes"].empty());
}

TEST(ReportMarkdown, MixedWorkloadHasAPerClassTable) {
  const std::string markdown = markdown_report(mixed_report(), nullptr);
  EXPECT_NE(markdown.find("2 long requests of 4096 / 8 tokens"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| c=4 | short | 8/8 | 30.0 | 18.0 / 25.0 / 31.0 | 4.0 / 9.5 |"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| c=1 | long | 2/2 | 4.0 | 880.0 / 950.0 / 990.0 | – |"), std::string::npos) << markdown;
  EXPECT_EQ(markdown_report(sample_report("plain", 1), nullptr).find("| class |"), std::string::npos);
}

TEST(ReportJson, SpeculationRoundTripsAndIsReported) {
  BenchReport report = sample_report("spec", 10);
  report.levels[1].speculation = SpeculationSummary{.num_drafts = 40, .draft_tokens = 160, .accepted_tokens = 120};
  const nlohmann::json json = report_to_json(report);
  EXPECT_TRUE(json["levels"][0]["speculation"].is_null());
  EXPECT_EQ(json["levels"][1]["speculation"]["acceptance_rate"], 0.75);
  EXPECT_EQ(json["levels"][1]["speculation"]["mean_accepted_length"], 4.0);  // 1 + 120 / 40
  EXPECT_EQ(report_to_json(report_from_json(nlohmann::json::parse(json.dump()), "x.json")), json);
  const std::string markdown = markdown_report(report, nullptr);
  EXPECT_NE(markdown.find("Speculative decoding at c=4: 120 of 160 proposed tokens accepted (75.0 %), mean accepted "
                          "length 4.00 over 40 verifying steps."),
            std::string::npos)
      << markdown;
  EXPECT_EQ(markdown.find("Speculative decoding at c=1"), std::string::npos);
}

TEST(ReportJson, WrongSchemaIsAFormatError) {
  nlohmann::json json = report_to_json(sample_report("a", 1));
  json["schema"] = "something.else";
  EXPECT_THROW(report_from_json(json, "x.json"), Error);
  json = report_to_json(sample_report("a", 1));
  json["levels"][0]["completed"] = "many";
  EXPECT_THROW(report_from_json(json, "x.json"), Error);
}

TEST(ReportMarkdown, OneRowPerLevelAndComparison) {
  const BenchReport before = sample_report("naive", 50);
  const BenchReport after = sample_report("default", 100);
  const std::string single = markdown_report(after, nullptr);
  EXPECT_NE(single.find("| c=1 | 8/8 | 0 |"), std::string::npos) << single;
  EXPECT_NE(single.find("| c=4 | 7/8 | http_429 1 |"), std::string::npos) << single;
  EXPECT_NE(single.find("10.0 / 9.0 / 12.0 / 13.0"), std::string::npos) << single;
  EXPECT_NE(single.find("50 %"), std::string::npos);

  const std::string compared = markdown_report(after, &before);
  EXPECT_NE(compared.find("### naive vs default"), std::string::npos) << compared;
  EXPECT_NE(compared.find("| c=1 | naive | 9.0 | 12.0 | 50.0 |"), std::string::npos) << compared;
  EXPECT_NE(compared.find("| c=1 | default | 9.0 | 12.0 | 100.0 |"), std::string::npos) << compared;
  EXPECT_NE(compared.find("| c=4 | default | 36.0 | 48.0 | 400.0 |"), std::string::npos) << compared;
  // Summary: c=4 had errors, so the largest error-free level is 1; peak memory 2e9 B = 1.86 GiB.
  EXPECT_NE(compared.find("| naive | 1 | 200.0 | 1.86 | 50 % |"), std::string::npos) << compared;
}

// Checks that every element is closed in order (a small well-formedness check, not a full XML parser).
void expect_balanced_xml(const std::string& xml) {
  std::vector<std::string> open;
  const std::regex tag(R"(<(/?)([A-Za-z][\w:-]*)[^>]*?(/?)>)");
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    if (m[3] == "/") continue;
    if (m[1] == "/") {
      ASSERT_FALSE(open.empty()) << "stray </" << m[2] << ">";
      ASSERT_EQ(open.back(), m[2].str());
      open.pop_back();
    } else {
      open.push_back(m[2]);
    }
  }
  EXPECT_TRUE(open.empty()) << "unclosed <" << open.back() << ">";
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

TEST(ReportSvg, WellFormedWithOneLinePerLabelPerPanel) {
  const BenchReport a = sample_report("naive", 50);
  const BenchReport b = sample_report("default <&>", 100);
  const std::string svg = svg_chart({&a, &b});
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  expect_balanced_xml(svg);
  EXPECT_EQ(count(svg, "<polyline"), 4u);  // two panels × two labels
  EXPECT_NE(svg.find("default &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("output tokens/s"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 8u);  // two levels per line
}

TEST(ReportSvg, AxisTicks) {
  EXPECT_EQ(axis_ticks(9), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(axis_ticks(100), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const std::vector<double> small = axis_ticks(0.7);
  ASSERT_EQ(small.size(), 5u);
  EXPECT_NEAR(small.back(), 0.8, 1e-12);
  EXPECT_EQ(axis_ticks(0), (std::vector<double>{0, 1}));
}

}  // namespace
}  // namespace qinfer::loadgen
