#include "onnx_export/onnx_graph.h"

#include <filesystem>

#include "core/error.h"

namespace splitdec::onnx_export {

namespace {
// Large tensors start on a 64 KiB boundary (a multiple of the allocation
// granularity of every platform) so that ONNX Runtime may map them instead
// of copying; small ones only need float alignment.
constexpr int64_t kMapAlignment = 64 * 1024;
constexpr int64_t kSmallAlignment = 16;
}  // namespace

WeightFile::WeightFile(const std::string& dir, const std::string& file_name)
    : path_((std::filesystem::path(dir) / file_name).string()), file_name_(file_name) {
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw InputError("cannot write " + path_);
}

WeightFile::Span WeightFile::add(const std::string& name, const TensorData& make) {
  if (auto it = written_.find(name); it != written_.end()) return it->second;
  const std::vector<float> data = make();
  return write(name, data.data(), int64_t(data.size() * sizeof(float)));
}

WeightFile::Span WeightFile::add_bytes(const std::string& name, const ByteData& make) {
  if (auto it = written_.find(name); it != written_.end()) return it->second;
  const std::vector<uint8_t> data = make();
  return write(name, data.data(), int64_t(data.size()));
}

WeightFile::Span WeightFile::write(const std::string& name, const void* data, int64_t bytes) {
  const int64_t align = bytes >= kMapAlignment ? kMapAlignment : kSmallAlignment;
  const int64_t pad = (align - size_ % align) % align;
  static const char zeros[kMapAlignment] = {};
  out_.write(zeros, pad);
  Span s{size_ + pad, bytes};
  out_.write(static_cast<const char*>(data), bytes);
  if (!out_) throw InputError("write failed: " + path_ + " (disk full?)");
  size_ = s.offset + bytes;
  written_[name] = s;
  return s;
}

void WeightFile::close() {
  out_.close();
  if (!out_) throw InputError("write failed: " + path_);
}

GraphBuilder::GraphBuilder(onnx::GraphProto& graph, WeightFile& weights) : graph_(graph), weights_(weights) {}

namespace {
void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem_type, const std::vector<Dim>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (std::holds_alternative<int64_t>(d)) dim->set_dim_value(std::get<int64_t>(d));
    else dim->set_dim_param(std::get<std::string>(d));
  }
}
}  // namespace

void GraphBuilder::input(const std::string& name, int elem_type, const std::vector<Dim>& dims) {
  set_type(graph_.add_input(), name, elem_type, dims);
}

void GraphBuilder::input_any_rank(const std::string& name, int elem_type) {
  onnx::ValueInfoProto* v = graph_.add_input();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

void GraphBuilder::output(const std::string& name, int elem_type, const std::vector<Dim>& dims) {
  set_type(graph_.add_output(), name, elem_type, dims);
}

std::string GraphBuilder::fresh(const std::string& hint) {
  const std::string base = scope_.empty() ? hint : scope_ + "/" + hint;
  const int n = used_[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

std::vector<std::string> GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs, int outputs,
                                            const std::vector<Attr>& attrs, const std::string& domain) {
  std::vector<std::string> names;
  for (int k = 0; k < outputs; ++k) names.push_back(fresh(outputs == 1 ? op : op + "_out" + std::to_string(k)));
  return node_named(op, inputs, names, attrs, domain);
}

std::vector<std::string> GraphBuilder::node_named(const std::string& op, const std::vector<std::string>& inputs,
                                                  const std::vector<std::string>& outputs,
                                                  const std::vector<Attr>& attrs, const std::string& domain) {
  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(fresh(op + "_node"));
  if (!domain.empty()) n->set_domain(domain);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  for (const Attr& a : attrs) {
    onnx::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) p->set_type(onnx::AttributeProto::INT), p->set_i(*i);
    else if (const auto* f = std::get_if<float>(&a.value)) p->set_type(onnx::AttributeProto::FLOAT), p->set_f(*f);
    else if (const auto* s = std::get_if<std::string>(&a.value)) p->set_type(onnx::AttributeProto::STRING), p->set_s(*s);
    else if (const auto* g = std::get_if<onnx::GraphProto>(&a.value)) p->set_type(onnx::AttributeProto::GRAPH), *p->mutable_g() = *g;
    else {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : std::get<std::vector<int64_t>>(a.value)) p->add_ints(v);
    }
  }
  return outputs;
}

std::string GraphBuilder::const_i64(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
  onnx::TensorProto* t = graph_.add_initializer();
  const std::string name = fresh("const");
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
  return name;
}

std::string GraphBuilder::const_f32(const std::vector<float>& values, const std::vector<int64_t>& dims) {
  onnx::TensorProto* t = graph_.add_initializer();
  const std::string name = fresh("const");
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return name;
}

std::string GraphBuilder::scalar_f32(float v) { return const_f32({v}, {}); }

std::string GraphBuilder::scalar_i64(int64_t v) { return const_i64({v}, {}); }

std::string GraphBuilder::const_u8(uint8_t v) {
  onnx::TensorProto* t = graph_.add_initializer();
  const std::string name = fresh("const");
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::UINT8);
  t->add_int32_data(v);  // ONNX keeps uint8 values in int32_data
  return name;
}

std::string GraphBuilder::gelu_tanh(const std::string& x) {
  const std::string x3 = op("Mul", {op("Mul", {x, x}), x});
  const std::string inner =
      op("Mul", {op("Add", {x, op("Mul", {x3, scalar_f32(0.044715f)})}), scalar_f32(0.7978845608028654f)});
  const std::string t = op("Add", {op("Tanh", {inner}), scalar_f32(1.f)});
  return op("Mul", {op("Mul", {x, t}), scalar_f32(0.5f)});
}

std::string GraphBuilder::weight(const std::string& name, const std::vector<int64_t>& dims, const TensorData& data) {
  if (weights_added_.insert(name).second) external(name, onnx::TensorProto::FLOAT, dims, weights_.add(name, data));
  return name;
}

std::string GraphBuilder::weight_u8(const std::string& name, const std::vector<int64_t>& dims, const ByteData& data) {
  if (weights_added_.insert(name).second) external(name, onnx::TensorProto::UINT8, dims, weights_.add_bytes(name, data));
  return name;
}

void GraphBuilder::external(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                            WeightFile::Span span) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(elem_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_entry = [t](const std::string& k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_entry("location", weights_.file_name());
  add_entry("offset", std::to_string(span.offset));
  add_entry("length", std::to_string(span.length));
}

void init_model(onnx::ModelProto& model, const std::string& graph_name) {
  // IR 11 is the first IR version that admits opset 24.
  model.set_ir_version(11);
  model.set_producer_name("splitdec");
  auto* onnx_opset = model.add_opset_import();
  onnx_opset->set_domain("");
  onnx_opset->set_version(24);
  auto* ms = model.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  model.mutable_graph()->set_name(graph_name);
}

void save_model(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out)) throw InputError("cannot write " + path);
}

}  // namespace splitdec::onnx_export
