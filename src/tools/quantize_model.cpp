#include "tools/quantize_model.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "io/gguf.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/quantized_tensors.h"
#include "model/weights.h"

namespace splitdec {

namespace fs = std::filesystem;

namespace {

// What becomes of one source tensor.
struct Plan {
  const TensorView* v;
  std::optional<WeightFormat> to;  // quantized to this; nullopt: copied as stored
};

bool kept(const std::string& name, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return ::fnmatch(p.c_str(), name.c_str(), 0) == 0; });
}

// Copies v's bytes into the writer 8 MiB at a time, dropping the source's
// pages. A NaN or Inf is refused by name, as the loader would refuse it: a
// written folder should load.
void copy_tensor(const TensorStore& store, const TensorView& v, SafetensorsWriter& out) {
  const size_t element = dtype_size(v.dtype);
  const size_t kPiece = (size_t(8) << 20) / element * element;
  for (size_t off = 0; off < v.nbytes; off += kPiece) {
    TensorView piece = v;
    piece.data = v.data + off;
    piece.nbytes = std::min(kPiece, v.nbytes - off);
    piece.shape = {int64_t(piece.nbytes / element)};
    if (const int64_t bad = piece.first_non_finite(); bad >= 0)
      throw FormatError(v.file + ": tensor '" + v.name + "' holds a non-finite value (NaN or Inf) at element " +
                        std::to_string(int64_t(off / element) + bad) + "; quantize copies it as stored and refuses it");
    out.write(piece.data, piece.nbytes);
    store.release(piece);
  }
}

// v's rows quantized to `to`, values streamed to the writer, then scales.
void quantize_tensor(const TensorStore& store, const TensorView& stored, WeightFormat to, SafetensorsWriter& out) {
  TensorView v = stored;  // an expert stack [E, out, in] as E * out rows
  v.shape = {stored.numel() / stored.shape.back(), stored.shape.back()};
  const int rows = int(v.shape[0]), in = int(v.shape[1]), step = convert_piece_rows(in);
  std::vector<uint16_t> scales(size_t(rows) * size_t(in / 32));
  std::vector<uint8_t> values;
  for (int r0 = 0; r0 < rows; r0 += step) {
    const int n = std::min(step, rows - r0);
    WeightMatrix m = WeightMatrix::zeros(to, n, in);
    convert_rows(store, v, r0, n, m, 0);
    values.resize(size_t(n) * (weight_row_bytes(to, in) - size_t(in / 32) * 2));
    split_quantized_rows(m, 0, n, values.data(), scales.data() + size_t(r0) * size_t(in / 32));
    out.write(values.data(), values.size());
  }
  out.write(scales.data(), scales.size() * 2);
}

}  // namespace

nlohmann::ordered_json quantization_note(const std::string& weights, const std::vector<std::string>& kept) {
  const WeightLoading scheme = weight_loading_named(weights);
  const WeightFormat linear = *scheme.format, embedding = scheme.embedding_format.value_or(linear);
  return {{"weights", weights},
          {"linear", weight_format_name(linear)},
          {"embedding", weight_format_name(embedding)},
          {"block_size", 32},
          {"scale_dtype", "float16"},
          {"layout", "NAME: block values (Q8_0: I8 [out, in]; Q4_0: U8 [out, in / 2], Q4_0's nibble packing), NAME_scale: F16 [out, in / 32]"},
          {"kept", kept}};
}

QuantizeSummary quantize_model(const QuantizeOptions& o) {
  const WeightLoading scheme = weight_loading_named(o.weights);
  if (!scheme.format || scheme.f32_activations)
    throw InputError("--weights " + o.weights + ": quantize writes q8 or q4 (activations are chosen at load: --weights q8-f32act)");
  if (is_gguf_path(o.model_dir))
    throw InputError("--model " + o.model_dir + " is a GGUF file; quantize reads a model folder (llama.cpp's llama-quantize "
                     "requantizes GGUFs)");
  std::error_code ec;
  if (fs::exists(o.out_dir) && fs::equivalent(o.out_dir, o.model_dir, ec))
    throw InputError("--out " + o.out_dir + " is the source folder; write the quantized model to a new one");
  if (fs::exists(o.out_dir) && !fs::is_empty(o.out_dir, ec))
    throw InputError("--out " + o.out_dir + " is not empty; give a new or empty directory");
  const bool created = !fs::exists(o.out_dir);
  const ModelConfig config = load_model_config(o.model_dir);
  const TensorStore store = TensorStore::open_dir(o.model_dir);
  const std::string prefix = find_decoder_prefix(store);
  const WeightFormat linear = *scheme.format, embedding = scheme.embedding_format.value_or(linear);
  const std::map<std::string, bool> matrices = decoder_matrix_names(config, prefix);  // name -> is the embedding

  QuantizeSummary summary;
  std::vector<Plan> plans;
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, v] : store.tensors()) {
    if (!dtype_is_float(v.dtype))
      throw InputError("--model " + o.model_dir + " is quantized already (tensor '" + name + "' is " + dtype_name(v.dtype) +
                       "); quantize from the float checkpoint");
    Plan p{&v, std::nullopt};
    const auto m = matrices.find(name);
    const WeightFormat to = m != matrices.end() && m->second ? embedding : linear;
    // A matrix [out, in], or an expert stack [E, out, in] written as E * out rows.
    const bool matrix_shape = v.shape.size() == 2 || v.shape.size() == 3;
    const int64_t rows = matrix_shape ? v.numel() / v.shape.back() : 0;
    if (m != matrices.end() && matrix_shape && weight_format_fits(to, int(v.shape.back()))) {
      if (kept(name, o.keep)) ++summary.kept;
      else p.to = to;
    }
    if (p.to && store.find(quantized_scale_name(name)))
      throw FormatError(v.file + ": tensor '" + quantized_scale_name(name) + "' exists already, and quantizing '" + name +
                        "' would write its scales under that name");
    if (p.to) {
      ++summary.quantized;
      entries.push_back({name, quantized_values_dtype(*p.to), quantized_values_shape(*p.to, rows, v.shape.back())});
      entries.push_back({quantized_scale_name(name), DType::F16, {rows, v.shape.back() / 32}});
    } else {
      entries.push_back({name, v.dtype, v.shape});
    }
    summary.bytes_in += v.nbytes;
    plans.push_back(p);
  }
  for (const SafetensorsWriter::Entry& e : entries) summary.bytes_out += tensor_nbytes(e.dtype, e.shape);
  // A pattern that matches nothing is a typo or a malformed glob ('['), not a choice.
  for (const std::string& pattern : o.keep) {
    const bool matches = std::any_of(store.tensors().begin(), store.tensors().end(),
                                     [&](const auto& t) { return kept(t.first, {pattern}); });
    if (!matches)
      throw InputError("--keep '" + pattern + "' matches no tensor of " + o.model_dir + " (" +
                       std::to_string(store.tensors().size()) + " tensors" +
                       (store.tensors().empty() ? "" : ", e.g. '" + store.tensors().begin()->first + "'") +
                       "); --keep takes a glob over tensor names, such as '*embed_tokens*'");
  }

  fs::create_directories(o.out_dir, ec);
  if (ec) throw InputError("--out " + o.out_dir + ": cannot create directory: " + ec.message());
  // Written under a temporary name: an interrupted run leaves no folder that
  // looks whole, and a failed one (a bad tensor, a full disk) removes what it
  // wrote, so that the same command can run again.
  const fs::path partial = fs::path(o.out_dir) / "model.safetensors.partial";
  struct Cleanup {
    fs::path dir;
    bool created, done = false;
    ~Cleanup() {
      if (done) return;
      std::error_code e;
      if (created) {
        fs::remove_all(dir, e);
        return;
      }
      std::vector<fs::path> written;  // the folder was empty: everything in it is ours
      for (const fs::directory_entry& f : fs::directory_iterator(dir, e)) written.push_back(f.path());
      for (const fs::path& f : written) fs::remove_all(f, e);
    }
  } cleanup{o.out_dir, created};
  {
    SafetensorsWriter out(partial.string(), std::move(entries), {{"format", "pt"}, {"splitdec_quantization", o.weights}});
    for (size_t i = 0; i < plans.size(); ++i) {
      if (o.progress) o.progress(i, plans.size());
      if (plans[i].to) quantize_tensor(store, *plans[i].v, *plans[i].to, out);
      else copy_tensor(store, *plans[i].v, out);
    }
    out.finish();
  }
  // Every other file of the folder (tokenizer, templates, processor
  // configs) as it is; config.json with the note.
  for (const fs::directory_entry& f : fs::directory_iterator(o.model_dir)) {
    const std::string name = f.path().filename().string();
    if (!f.is_regular_file() || name.ends_with(".safetensors") || name == "model.safetensors.index.json") continue;
    if (name == "config.json") {
      std::ifstream in(f.path());
      nlohmann::ordered_json cfg = nlohmann::ordered_json::parse(in);
      cfg["splitdec_quantization"] = quantization_note(o.weights, o.keep);
      std::ofstream out(fs::path(o.out_dir) / name);
      out << cfg.dump(2) << "\n";
      if (!out) throw FormatError((fs::path(o.out_dir) / name).string() + ": write failed");
      continue;
    }
    fs::copy_file(f.path(), fs::path(o.out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw FormatError((fs::path(o.out_dir) / name).string() + ": cannot copy: " + ec.message());
  }
  fs::rename(partial, fs::path(o.out_dir) / "model.safetensors", ec);
  if (ec) throw FormatError(partial.string() + ": cannot rename: " + ec.message());
  cleanup.done = true;
  if (o.progress) o.progress(plans.size(), plans.size());
  return summary;
}

}  // namespace splitdec
