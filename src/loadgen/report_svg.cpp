#include "loadgen/report_svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "util/html_escape.h"

namespace qinfer::loadgen {

namespace {

constexpr double kPanelWidth = 460;
constexpr double kPanelHeight = 340;
constexpr double kMarginLeft = 70;
constexpr double kMarginRight = 20;
constexpr double kMarginTop = 40;
constexpr double kMarginBottom = 50;
constexpr double kLegendHeight = 30;
constexpr std::array<const char*, 6> kColors = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string coordinate(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

struct Point {
  double x;
  double y;
};

using LatencyOf = std::optional<double> (*)(const LevelResult&);

std::vector<Point> points(const BenchReport& run, LatencyOf latency) {
  std::vector<Point> out;
  for (const LevelResult& level : run.levels)
    if (const std::optional<double> y = latency(level); y && level.completed > 0)
      out.push_back({level.output_throughput, *y});
  return out;
}

void append_panel(std::string& svg, const std::vector<const BenchReport*>& runs, double left, const char* title,
                  LatencyOf latency) {
  double max_x = 0;
  double max_y = 0;
  for (const BenchReport* run : runs)
    for (const Point& p : points(*run, latency)) {
      max_x = std::max(max_x, p.x);
      max_y = std::max(max_y, p.y);
    }
  const std::vector<double> x_ticks = axis_ticks(max_x);
  const std::vector<double> y_ticks = axis_ticks(max_y);
  const double x0 = left + kMarginLeft;
  const double x1 = left + kPanelWidth - kMarginRight;
  const double y0 = kPanelHeight - kMarginBottom;  // bottom of the plot area
  const double y1 = kMarginTop;
  const auto sx = [&](double x) { return x0 + (x1 - x0) * x / x_ticks.back(); };
  const auto sy = [&](double y) { return y0 - (y0 - y1) * y / y_ticks.back(); };

  svg += "<g class=\"panel\">\n";
  svg += "<text x=\"" + coordinate((x0 + x1) / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
         std::string(title) + "</text>\n";
  for (double t : x_ticks) {
    svg += "<line x1=\"" + coordinate(sx(t)) + "\" y1=\"" + coordinate(y0) + "\" x2=\"" + coordinate(sx(t)) +
           "\" y2=\"" + coordinate(y1) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + coordinate(sx(t)) + "\" y=\"" + coordinate(y0 + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + number(t) + "</text>\n";
  }
  for (double t : y_ticks) {
    svg += "<line x1=\"" + coordinate(x0) + "\" y1=\"" + coordinate(sy(t)) + "\" x2=\"" + coordinate(x1) + "\" y2=\"" +
           coordinate(sy(t)) + "\" stroke=\"#e0e0e0\"/>\n";
    svg += "<text x=\"" + coordinate(x0 - 6) + "\" y=\"" + coordinate(sy(t) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\">" + number(t) + "</text>\n";
  }
  svg += "<line x1=\"" + coordinate(x0) + "\" y1=\"" + coordinate(y0) + "\" x2=\"" + coordinate(x1) + "\" y2=\"" +
         coordinate(y0) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + coordinate(x0) + "\" y1=\"" + coordinate(y0) + "\" x2=\"" + coordinate(x0) + "\" y2=\"" +
         coordinate(y1) + "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + coordinate((x0 + x1) / 2) + "\" y=\"" + coordinate(y0 + 38) +
         "\" text-anchor=\"middle\" font-size=\"12\">output tokens/s</text>\n";
  svg += "<text transform=\"translate(" + coordinate(left + 18) + "," + coordinate((y0 + y1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">ms</text>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* color = kColors[i % kColors.size()];
    std::string polyline;
    std::string markers;
    for (const Point& p : points(*runs[i], latency)) {
      if (!polyline.empty()) polyline += ' ';
      polyline += coordinate(sx(p.x));
      polyline += ',';
      polyline += coordinate(sy(p.y));
      markers += "<circle cx=\"" + coordinate(sx(p.x)) + "\" cy=\"" + coordinate(sy(p.y)) + "\" r=\"3\" fill=\"" +
                 color + "\"/>\n";
    }
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\" points=\"" + polyline +
           "\"><title>" + html_escape(runs[i]->label) + "</title></polyline>\n" + markers;
  }
  svg += "</g>\n";
}

}  // namespace

std::vector<double> axis_ticks(double max) {
  if (!(max > 0) || !std::isfinite(max)) return {0, 1};
  const double rough = max / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(rough)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (magnitude * factor >= rough) {
      step = magnitude * factor;
      break;
    }
  std::vector<double> ticks;
  for (int i = 0; ticks.empty() || ticks.back() < max; ++i) ticks.push_back(step * i);
  return ticks;
}

std::string svg_chart(const std::vector<const BenchReport*>& runs) {
  const double width = 2 * kPanelWidth;
  const double height = kPanelHeight + kLegendHeight;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    coordinate(width) + "\" height=\"" + coordinate(height) + "\" viewBox=\"0 0 " + coordinate(width) +
                    " " + coordinate(height) + "\" font-family=\"sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  append_panel(svg, runs, 0, "P50 time to first token vs throughput",
               [](const LevelResult& l) -> std::optional<double> {
                 return l.ttft_ms ? std::optional(l.ttft_ms->p50) : std::nullopt;
               });
  append_panel(svg, runs, kPanelWidth, "P50 time per output token vs throughput",
               [](const LevelResult& l) -> std::optional<double> {
                 return l.tpot_ms ? std::optional(l.tpot_ms->p50) : std::nullopt;
               });
  double legend_x = kMarginLeft;
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string y = coordinate(kPanelHeight + 15);
    svg += "<line x1=\"" + coordinate(legend_x) + "\" y1=\"" + y + "\" x2=\"" + coordinate(legend_x + 24) + "\" y2=\"" +
           y + "\" stroke=\"" + kColors[i % kColors.size()] + "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + coordinate(legend_x + 30) + "\" y=\"" + coordinate(kPanelHeight + 19) +
           "\" font-size=\"12\">" + html_escape(runs[i]->label) + "</text>\n";
    legend_x += 40 + 8 * static_cast<double>(runs[i]->label.size());
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace qinfer::loadgen
