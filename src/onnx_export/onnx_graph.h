// A small layer over the ONNX protobuf classes (Debian's libonnx-dev) for
// writing graphs by hand: nodes with readable value names, constants, and
// weights that live in one external-data file shared by every graph of a
// package (each graph only records offsets into it).
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

namespace splitdec::onnx_export {

// Float tensor contents, made only when a tensor is first written: every
// decoder graph of a package refers to the same weights, and converting a
// large one (bf16 to f32, a transpose) is done once.
using TensorData = std::function<std::vector<float>()>;
// Byte tensor contents (uint8 codes of block-quantized weights), made the same way.
using ByteData = std::function<std::vector<uint8_t>()>;

// The package's weights file. A tensor added twice under one name (every
// layer weight in the prefill and decode graphs; the embedding table, which
// is also the LM head) is written once.
class WeightFile {
 public:
  WeightFile(const std::string& dir, const std::string& file_name);
  struct Span {
    int64_t offset = 0, length = 0;
  };
  Span add(const std::string& name, const TensorData& data);
  Span add_bytes(const std::string& name, const ByteData& data);
  const std::string& file_name() const { return file_name_; }
  int64_t bytes() const { return size_; }
  void close();

 private:
  Span write(const std::string& name, const void* data, int64_t bytes);
  std::string path_, file_name_;
  std::ofstream out_;
  int64_t size_ = 0;
  std::map<std::string, Span> written_;
};

// A graph attribute is a subgraph (Scan's body).
using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, onnx::GraphProto>;
struct Attr {
  std::string name;
  AttrValue value;
};

// A dimension of a graph input or output: a fixed size or a symbolic name.
using Dim = std::variant<int64_t, std::string>;

class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto& graph, WeightFile& weights);

  // Value names get `scope` as prefix ("layers.3/q_norm/..."), which keeps
  // profiles and error messages readable.
  void set_scope(const std::string& scope) { scope_ = scope; }

  void input(const std::string& name, int elem_type, const std::vector<Dim>& dims);
  // An input of any rank (no shape in its type): for a tensor that callers
  // bind in different ranks, which the graph reshapes itself.
  void input_any_rank(const std::string& name, int elem_type);
  void output(const std::string& name, int elem_type, const std::vector<Dim>& dims);

  // One node; returns its output names (`outputs` of them, or the given names).
  std::vector<std::string> node(const std::string& op, const std::vector<std::string>& inputs, int outputs = 1,
                                const std::vector<Attr>& attrs = {}, const std::string& domain = "");
  std::vector<std::string> node_named(const std::string& op, const std::vector<std::string>& inputs,
                                      const std::vector<std::string>& outputs, const std::vector<Attr>& attrs = {},
                                      const std::string& domain = "");
  std::string op(const std::string& op, const std::vector<std::string>& inputs, const std::vector<Attr>& attrs = {}) {
    return node(op, inputs, 1, attrs)[0];
  }

  // Small constants, stored inside the graph.
  std::string const_i64(const std::vector<int64_t>& values, const std::vector<int64_t>& dims);
  std::string const_i64(int64_t v) { return const_i64({v}, {1}); }
  std::string scalar_f32(float v);  // shape [] float
  std::string const_f32(const std::vector<float>& values, const std::vector<int64_t>& dims);
  std::string scalar_i64(int64_t v);  // shape [] int64
  std::string const_u8(uint8_t v);    // shape [] uint8
  // HF gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), shared by the decoder and the towers.
  std::string gelu_tanh(const std::string& x);
  // A float tensor in the weights file.
  std::string weight(const std::string& name, const std::vector<int64_t>& dims, const TensorData& data);
  // A uint8 tensor in the weights file.
  std::string weight_u8(const std::string& name, const std::vector<int64_t>& dims, const ByteData& data);

  // A value name not used before in this graph.
  std::string new_name(const std::string& hint) { return fresh(hint); }

 private:
  std::string fresh(const std::string& hint);
  // The initializer `name` pointing at `span` of the weights file.
  void external(const std::string& name, int elem_type, const std::vector<int64_t>& dims, WeightFile::Span span);
  onnx::GraphProto& graph_;
  WeightFile& weights_;
  std::string scope_;
  std::map<std::string, int> used_;
  std::set<std::string> weights_added_;  // initializers already in this graph
};

// A model with the opsets our graphs use: ai.onnx 24 (Attention, TensorScatter)
// and com.microsoft 1 (GroupQueryAttention).
void init_model(onnx::ModelProto& model, const std::string& graph_name);
void save_model(const onnx::ModelProto& model, const std::string& path);

}  // namespace splitdec::onnx_export
