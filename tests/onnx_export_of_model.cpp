// export_onnx_package for a Model built in a test (test_onnx_export.cpp's
// fixture is named OnnxPackage, as is the package struct of
// onnx_export/onnx_package.h, so that header is included here only).
#include "onnx_export/onnx_package.h"

namespace splitdec::test {

void export_split_package(const Model& model, const std::string& model_dir, const std::string& out_dir, int64_t max_length) {
  OnnxExportOptions o;
  o.max_length = max_length;
  o.model_dir = model_dir;
  export_onnx_package(model, out_dir, o);
}

}  // namespace splitdec::test
