// A small line chart as SVG: decode cost against context, one line per plan.
#pragma once

#include <string>
#include <vector>

namespace splitdec::bench {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series);

}  // namespace splitdec::bench
