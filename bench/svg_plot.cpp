#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace splitdec::bench {

std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series) {
  const double W = 720, H = 440, left = 70, right = 170, top = 40, bottom = 60;
  double xmin = 1e300, xmax = -1e300, ymax = 0;
  for (const auto& s : series)
    for (size_t k = 0; k < s.x.size(); ++k) {
      xmin = std::min(xmin, std::log2(s.x[k]));
      xmax = std::max(xmax, std::log2(s.x[k]));
      ymax = std::max(ymax, s.y[k]);
    }
  if (xmax <= xmin) xmax = xmin + 1;
  if (ymax <= 0) ymax = 1;
  ymax *= 1.1;
  auto px = [&](double x) { return left + (std::log2(x) - xmin) / (xmax - xmin) * (W - left - right); };
  auto py = [&](double y) { return H - bottom - y / ymax * (H - top - bottom); };
  const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::string svg;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' font-size='12'>\n"
                "<rect width='100%%' height='100%%' fill='white'/>\n"
                "<text x='%.0f' y='22' font-size='15'>%s</text>\n",
                W, H, left, title.c_str());
  svg += buf;
  // Axes and ticks.
  std::snprintf(buf, sizeof buf, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n", left, H - bottom, W - right, H - bottom);
  svg += buf;
  std::snprintf(buf, sizeof buf, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n", left, top, left, H - bottom);
  svg += buf;
  for (int k = 0; k <= 5; ++k) {
    const double y = ymax * k / 5;
    std::snprintf(buf, sizeof buf,
                  "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/><text x='%.0f' y='%.1f' text-anchor='end'>%.3g</text>\n",
                  left, py(y), W - right, py(y), left - 6, py(y) + 4, y);
    svg += buf;
  }
  for (double e = std::ceil(xmin); e <= xmax + 1e-9; e += 1) {
    const double x = std::pow(2.0, e);
    std::snprintf(buf, sizeof buf, "<text x='%.1f' y='%.0f' text-anchor='middle'>%s</text>\n", px(x), H - bottom + 18,
                  x >= 1024 ? (std::to_string(int(x / 1024)) + "K").c_str() : std::to_string(int(x)).c_str());
    svg += buf;
  }
  std::snprintf(buf, sizeof buf, "<text x='%.0f' y='%.0f' text-anchor='middle'>%s</text>\n", (left + W - right) / 2, H - 15, x_label.c_str());
  svg += buf;
  std::snprintf(buf, sizeof buf, "<text transform='translate(18,%.0f) rotate(-90)' text-anchor='middle'>%s</text>\n", (top + H - bottom) / 2,
                y_label.c_str());
  svg += buf;
  for (size_t s = 0; s < series.size(); ++s) {
    const char* c = colors[s % 6];
    std::string pts;
    for (size_t k = 0; k < series[s].x.size(); ++k) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(series[s].x[k]), py(series[s].y[k]));
      pts += buf;
      std::snprintf(buf, sizeof buf, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n", px(series[s].x[k]), py(series[s].y[k]), c);
      svg += buf;
    }
    svg += "<polyline fill='none' stroke-width='2' stroke='" + std::string(c) + "' points='" + pts + "'/>\n";
    std::snprintf(buf, sizeof buf, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2'/><text x='%.0f' y='%.0f'>%s</text>\n",
                  W - right + 12, top + 10 + 20.0 * double(s), W - right + 32, top + 10 + 20.0 * double(s), c, W - right + 38,
                  top + 14 + 20.0 * double(s), series[s].name.c_str());
    svg += buf;
  }
  return svg + "</svg>\n";
}

}  // namespace splitdec::bench
