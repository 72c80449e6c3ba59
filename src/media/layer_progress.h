// A media tower's progress, for a caller that shows it (one 896 px Gemma-3
// image takes minutes on a 2-core machine): called with (layers done,
// layers in all) before the first layer and after each. Empty: nobody is
// told.
#pragma once

#include <functional>

namespace splitdec {

using LayerProgress = std::function<void(int done, int total)>;

}  // namespace splitdec
