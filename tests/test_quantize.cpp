// `splitdec quantize` folders (tools/quantize_model.h, model/quantized_tensors.h):
// they load to exactly the matrices that quantizing at load gives, keep what
// --keep names, copy the rest, and a damaged quantized tensor is an error
// naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "splitdec/splitdec.h"
#include "model/quantized_tensors.h"
#include "io/safetensors.h"
#include "kv/kv_rows.h"
#include "model/gemma_model.h"
#include "tools/make_model.h"
#include "tools/quantize_model.h"
#include "model/reference_forward.h"
#include "test_prompts.h"
#include "model/weights.h"
#include "test_support.h"

using namespace splitdec;
namespace fs = std::filesystem;

namespace {

std::string quantized_copy(const std::string& src, const std::string& weights, std::vector<std::string> keep = {}) {
  const std::string out = test::temp_dir("quantized-" + weights);
  quantize_model(QuantizeOptions{.model_dir = src, .out_dir = out, .weights = weights, .keep = std::move(keep), .progress = {}});
  return out;
}

void expect_same_matrix(const WeightMatrix& a, const WeightMatrix& b, const std::string& what) {
  EXPECT_EQ(a.format, b.format) << what;
  EXPECT_EQ(a.out, b.out) << what;
  EXPECT_EQ(a.in, b.in) << what;
  EXPECT_EQ(a.int8_activations, b.int8_activations) << what;
  EXPECT_TRUE(a.data == b.data) << what << ": the stored blocks differ";
}

void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
  EXPECT_EQ(a.dtype, b.dtype);
  expect_same_matrix(a.embed_tokens, b.embed_tokens, "embed_tokens");
  expect_same_matrix(a.lm_head, b.lm_head, "lm_head");
  expect_same_matrix(a.per_layer_model_projection, b.per_layer_model_projection, "per_layer_model_projection");
  EXPECT_EQ(a.per_layer_table.empty(), b.per_layer_table.empty());
  EXPECT_EQ(a.final_norm, b.final_norm);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    const std::string l = "layer " + std::to_string(i) + " ";
    expect_same_matrix(x.q_proj, y.q_proj, l + "q_proj");
    expect_same_matrix(x.k_proj, y.k_proj, l + "k_proj");
    expect_same_matrix(x.v_proj, y.v_proj, l + "v_proj");
    expect_same_matrix(x.o_proj, y.o_proj, l + "o_proj");
    expect_same_matrix(x.gate_proj, y.gate_proj, l + "gate_proj");
    expect_same_matrix(x.up_proj, y.up_proj, l + "up_proj");
    expect_same_matrix(x.down_proj, y.down_proj, l + "down_proj");
    expect_same_matrix(x.per_layer_input_gate, y.per_layer_input_gate, l + "per_layer_input_gate");
    expect_same_matrix(x.per_layer_projection, y.per_layer_projection, l + "per_layer_projection");
    expect_same_matrix(x.router, y.router, l + "router");
    ASSERT_EQ(x.expert_gate_up.size(), y.expert_gate_up.size()) << l;
    for (size_t e = 0; e < x.expert_gate_up.size(); ++e) {
      expect_same_matrix(x.expert_gate_up[e], y.expert_gate_up[e], l + "expert_gate_up " + std::to_string(e));
      expect_same_matrix(x.expert_down[e], y.expert_down[e], l + "expert_down " + std::to_string(e));
    }
    EXPECT_EQ(x.q_norm, y.q_norm) << l;
    EXPECT_EQ(x.input_norm, y.input_norm) << l;
    EXPECT_EQ(x.post_feedforward_norm, y.post_feedforward_norm) << l;
  }
}

// A copy of `dir` whose model.safetensors went through `edit`.
std::string edited_copy(const std::string& dir, const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  const std::string out = test::temp_dir("edited");
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().filename() != "model.safetensors") fs::copy_file(f.path(), fs::path(out) / f.path().filename());
  std::vector<TensorToWrite> tensors;
  {
    const TensorStore store = TensorStore::open_dir(dir);
    for (const auto& [name, v] : store.tensors()) tensors.push_back({name, v.dtype, v.shape, std::vector<uint8_t>(v.data, v.data + v.nbytes)});
  }
  edit(tensors);
  write_safetensors((fs::path(out) / "model.safetensors").string(), tensors);
  return out;
}

TensorToWrite& find(std::vector<TensorToWrite>& ts, const std::string& name) {
  for (TensorToWrite& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

void expect_load_fails(const std::string& dir, const std::vector<std::string>& parts) {
  try {
    (void)Model::load(dir);
    ADD_FAILURE() << "loaded";
  } catch (const FormatError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
  }
}

const std::string kUp = "model.language_model.layers.0.mlp.up_proj.weight";

}  // namespace

// Both formats, from f32 and bf16 checkpoints: the folder loads to the very
// blocks --weights gives at load (so the same tokens and logits), and with
// -f32act too.
TEST(Quantize, FolderLoadsToTheBlocksThatQuantizingAtLoadGives) {
  for (const std::string dtype : {"f32", "bf16"}) {
    const std::string src = test::tiny_model_dir("tiny-gemma4", 0, dtype);
    SCOPED_TRACE("tiny-gemma4");
    for (const std::string weights : {"q8", "q4"}) {
      SCOPED_TRACE(dtype + " -> " + weights);
      const std::string out = quantized_copy(src, weights);
      const Model at_load = Model::load(src, {}, weight_loading_named(weights));
      const Model from_folder = Model::load(out);
      expect_same_weights(at_load.weights(), from_folder.weights());
      EXPECT_EQ(from_folder.weights().layers[0].up_proj.format, weights == "q8" ? WeightFormat::Q8_0 : WeightFormat::Q4_0);
      EXPECT_EQ(from_folder.weights().embed_tokens.format, WeightFormat::Q8_0);  // q4 keeps an 8-bit embedding
      expect_same_weights(Model::load(src, {}, weight_loading_named(weights + "-f32act")).weights(),
                          Model::load(out, {}, weight_loading_named(weights + "-f32act")).weights());
      // The file is ordinary safetensors: I8 / U8 values beside F16 scales.
      const TensorStore store = TensorStore::open_dir(out);
      EXPECT_EQ(store.get(kUp).dtype, weights == "q8" ? DType::I8 : DType::U8);
      EXPECT_EQ(store.get(kUp + "_scale").dtype, DType::F16);
      EXPECT_EQ(store.get(kUp + "_scale").shape[1] * 32, store.get(kUp).shape[1] * (weights == "q8" ? 1 : 2));
    }
  }
}

// Expert stacks [E, out, in] quantize as E * out rows and load per expert;
// the per-layer table stays float (read in place).
TEST(Quantize, ExpertsAndPerLayerEmbeddingsQuantizeAsAtLoad) {
  for (const std::string preset : {"tiny-gemma4-moe", "tiny-gemma4-ple"}) {
    const std::string src = test::tiny_model_dir(preset, 0, "bf16");
    for (const std::string weights : {"q8", "q4"}) {
      SCOPED_TRACE(preset + " -> " + weights);
      const std::string out = quantized_copy(src, weights);
      const Model at_load = Model::load(src, {}, weight_loading_named(weights));
      const Model from_folder = Model::load(out);
      expect_same_weights(at_load.weights(), from_folder.weights());
      const TensorStore store = TensorStore::open_dir(out);
      if (preset == "tiny-gemma4-moe") {
        const TensorView& g = store.get("model.language_model.layers.0.experts.gate_up_proj");
        EXPECT_EQ(g.dtype, weights == "q8" ? DType::I8 : DType::U8);
        EXPECT_EQ(g.shape[0], 8 * 64);  // E * 2 * moe_intermediate_size rows
        EXPECT_EQ(from_folder.weights().layers[0].expert_down[3].format, weights == "q8" ? WeightFormat::Q8_0 : WeightFormat::Q4_0);
        // The router stays as stored: rounding would flip its top-k choices.
        EXPECT_EQ(store.get("model.language_model.layers.0.router.proj.weight").dtype, DType::BF16);
        EXPECT_EQ(at_load.weights().layers[0].router.format, WeightFormat::BF16);
      } else {
        EXPECT_EQ(store.get("model.language_model.embed_tokens_per_layer.weight").dtype, DType::BF16);
      }
      const PromptBatch p = test::batch_of({test::SeqBuilder(from_folder.config(), 4).text(6)}, 0);
      EXPECT_EQ(reference_logits(at_load, p, MaskPolicy::Causal), reference_logits(from_folder, p, MaskPolicy::Causal));
    }
  }
}

TEST(Quantize, KeepsWhatKeepNamesAndCopiesTheRestOfTheFolder) {
  const std::string src = test::tiny_model_dir("tiny-gemma4");
  const std::string out = quantized_copy(src, "q4", {"*embed_tokens*", "*.layers.1.*"});
  const TensorStore in = TensorStore::open_dir(src), q = TensorStore::open_dir(out);
  EXPECT_EQ(q.get("model.language_model.embed_tokens.weight").dtype, DType::F32);
  EXPECT_EQ(q.get("model.language_model.layers.1.mlp.up_proj.weight").dtype, DType::F32);
  EXPECT_EQ(q.get(kUp).dtype, DType::U8);
  EXPECT_EQ(q.find("model.language_model.embed_tokens.weight_scale"), nullptr);
  // Norms and the media towers are copied byte for byte.
  for (const auto& [name, v] : in.tensors()) {
    if (v.shape.size() == 2 && name.find("language_model") != std::string::npos) continue;
    const TensorView& w = q.get(name);
    EXPECT_EQ(w.dtype, v.dtype) << name;
    EXPECT_TRUE(std::equal(v.data, v.data + v.nbytes, w.data)) << name;
  }
  for (const char* f : {"tokenizer.json", "chat_template.jinja", "tokenizer_config.json"})
    EXPECT_EQ(test::read_file(out + "/" + f), test::read_file(src + "/" + f)) << f;
  const nlohmann::json cfg = nlohmann::json::parse(test::read_file(out + "/config.json"));
  EXPECT_EQ(cfg["splitdec_quantization"]["linear"], "q4_0");
  EXPECT_EQ(cfg["splitdec_quantization"]["embedding"], "q8_0");
  EXPECT_EQ(cfg["splitdec_quantization"]["kept"].size(), 2u);
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.partial"));
  const Model m = Model::load(out);
  EXPECT_EQ(m.weights().embed_tokens.format, WeightFormat::F32);
  EXPECT_EQ(m.weights().layers[1].up_proj.format, WeightFormat::F32);
  EXPECT_EQ(m.weights().layers[0].up_proj.format, WeightFormat::Q4_0);
}

TEST(Quantize, RefusesBadOptionsByName) {
  const std::string src = test::tiny_model_dir("tiny-gemma4");
  auto fails = [&](QuantizeOptions o, const std::string& part) {
    try {
      quantize_model(o);
      ADD_FAILURE() << "quantized with --weights " << o.weights << " --out " << o.out_dir;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  fails({.model_dir = src, .out_dir = test::temp_dir("q") + "/new", .weights = "q8-f32act", .keep = {}, .progress = {}}, "q8 or q4");
  fails({.model_dir = src, .out_dir = test::temp_dir("q") + "/new", .weights = "q5", .keep = {}, .progress = {}}, "'q5'");
  fails({.model_dir = src, .out_dir = src, .weights = "q8", .keep = {}, .progress = {}}, "source folder");
  // A --keep glob that matches nothing (a typo, or a malformed '[') is refused, naming it, before anything is written.
  const std::string unwritten = test::temp_dir("q") + "/new";
  fails({.model_dir = src, .out_dir = unwritten, .weights = "q8", .keep = {"["}, .progress = {}},
        "--keep '[' matches no tensor");
  fails({.model_dir = src,
         .out_dir = unwritten,
         .weights = "q8",
         .keep = {"*embed_tokens*", "*embed_tokns*"},
         .progress = {}},
        "--keep '*embed_tokns*' matches no tensor");
  EXPECT_FALSE(fs::exists(unwritten));
  fails({.model_dir = src, .out_dir = quantized_copy(src, "q8"), .weights = "q8", .keep = {}, .progress = {}}, "not empty");
}

// A damaged quantized tensor is one FormatError naming it and what is wrong.
TEST(QuantizedFile, DamagedTensorsAreErrorsThatNameThem) {
  const std::string q8 = quantized_copy(test::tiny_model_dir("tiny-gemma4"), "q8");
  const std::string q4 = quantized_copy(test::tiny_model_dir("tiny-gemma4"), "q4");
  expect_load_fails(edited_copy(q8, [](std::vector<TensorToWrite>& ts) { std::erase_if(ts, [](auto& t) { return t.name == kUp + "_scale"; }); }),
                    {kUp + "_scale", "missing"});
  expect_load_fails(edited_copy(q8, [](std::vector<TensorToWrite>& ts) {
                      TensorToWrite& s = find(ts, kUp + "_scale");
                      s.shape[1] -= 1;  // a block short
                      s.bytes.resize(size_t(s.shape[0] * s.shape[1]) * 2);
                    }),
                    {kUp + "_scale", "expected F16 ["});
  expect_load_fails(edited_copy(q8, [](std::vector<TensorToWrite>& ts) {
                      TensorToWrite& s = find(ts, kUp + "_scale");
                      s.dtype = DType::BF16;
                    }),
                    {kUp + "_scale", "BF16"});
  expect_load_fails(edited_copy(q4, [](std::vector<TensorToWrite>& ts) {
                      TensorToWrite& v = find(ts, kUp);
                      v.shape[1] += 16;  // one more block's values than the config's rows hold
                      v.bytes.resize(size_t(v.shape[0] * v.shape[1]));
                    }),
                    {kUp, "U8", "expected ["});
  expect_load_fails(edited_copy(q8, [](std::vector<TensorToWrite>& ts) { find(ts, kUp).bytes[5] = 0x80; }), {kUp, "-128"});
  expect_load_fails(edited_copy(q8, [](std::vector<TensorToWrite>& ts) {
                      TensorToWrite& s = find(ts, kUp + "_scale");
                      s.bytes[2] = 0x00, s.bytes[3] = 0x7c;  // f16 +inf
                    }),
                    {kUp + "_scale", "non-finite"});
  // Only matrices may be quantized: an I8 norm is refused by name.
  expect_load_fails(edited_copy(q8, [](std::vector<TensorToWrite>& ts) {
                      TensorToWrite& n = find(ts, "model.language_model.norm.weight");
                      n.dtype = DType::I8;
                      n.bytes.assign(size_t(n.shape[0]), 1);
                    }),
                    {"model.language_model.norm.weight", "I8"});
}


// Review findings, each a test: a quantized tensor among the media tower's
// weights is refused by name (it would have been read as blocks, past its
// end); a folder that is quantized already is refused; a failed quantize
// leaves nothing behind, so the same command runs again; the writer refuses
// a name listed twice; a source that holds NAME_scale next to NAME is refused.
TEST(QuantizedFile, MediaTowerTensorsMustBeFloat) {
  const std::string q8 = quantized_copy(test::tiny_model_dir("tiny-gemma4"), "q8");
  const std::string bad = edited_copy(q8, [](std::vector<TensorToWrite>& ts) {
    TensorToWrite& t = find(ts, "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight");
    t.dtype = DType::I8;
    t.bytes.assign(size_t(t.shape[0] * t.shape[1]), 1);
  });
  try {
    (void)Engine::load(bad);
    ADD_FAILURE() << "loaded an I8 tower matrix";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("self_attn.q_proj.linear.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("I8"), std::string::npos) << e.what();
  }
}

TEST(Quantize, RefusesQuantizedSourcesAndCleansUpAfterAFailure) {
  const std::string src = test::tiny_model_dir("tiny-gemma4");
  const std::string q8 = quantized_copy(src, "q8");
  EXPECT_THROW(quantized_copy(q8, "q4"), InputError);
  // A NaN in the last layer's matrix: the run fails naming it, and removes what it wrote.
  const std::string nan = edited_copy(src, [](std::vector<TensorToWrite>& ts) {
    TensorToWrite& t = find(ts, "model.language_model.layers.5.mlp.down_proj.weight");
    const float x = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(t.bytes.data() + 8, &x, 4);
  });
  const std::string out = test::temp_dir("q-fail") + "/out";
  try {
    quantize_model(QuantizeOptions{.model_dir = nan, .out_dir = out, .weights = "q8", .keep = {}, .progress = {}});
    ADD_FAILURE() << "quantized a NaN";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.5.mlp.down_proj.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out)) << "the failed run left its output";
  // A NaN or Inf in a tensor copied as stored (a norm, or a --keep matrix) is refused the same way.
  const std::string inf_norm = edited_copy(src, [](std::vector<TensorToWrite>& ts) {
    TensorToWrite& t = find(ts, "model.language_model.norm.weight");
    const float x = std::numeric_limits<float>::infinity();
    std::memcpy(t.bytes.data() + 4, &x, 4);
  });
  for (const std::vector<std::string>& keep :
       {std::vector<std::string>{}, std::vector<std::string>{"*layers.5.mlp.down_proj*"}}) {
    const std::string where = keep.empty() ? inf_norm : nan;
    const std::string name = keep.empty() ? "model.language_model.norm.weight" : "layers.5.mlp.down_proj.weight";
    try {
      quantize_model(
          QuantizeOptions{.model_dir = where, .out_dir = out, .weights = "q8", .keep = keep, .progress = {}});
      ADD_FAILURE() << "copied a non-finite " << name;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("non-finite value (NaN or Inf) at element"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out));
  }
  const std::string empty = test::temp_dir("q-fail-empty");  // an existing empty --out stays, emptied
  EXPECT_THROW(quantize_model(QuantizeOptions{.model_dir = nan, .out_dir = empty, .weights = "q8", .keep = {}, .progress = {}}),
               FormatError);
  EXPECT_TRUE(fs::exists(empty) && fs::is_empty(empty));
  EXPECT_NO_THROW(quantize_model(QuantizeOptions{.model_dir = src, .out_dir = empty, .weights = "q8", .keep = {}, .progress = {}}));
  // NAME_scale already in the source would collide with the scales quantize writes.
  const std::string clash = edited_copy(src, [](std::vector<TensorToWrite>& ts) {
    ts.push_back({kUp + "_scale", DType::F16, {1}, {0, 0}});
  });
  EXPECT_THROW(quantized_copy(clash, "q8"), FormatError);
  EXPECT_THROW(SafetensorsWriter(test::temp_dir("dup") + "/x.safetensors", {{"a", DType::F32, {1}}, {"a", DType::F32, {1}}}), Error);
}

// Blocks too small for a normal f32 scale quantize to zeros (1 / d would
// overflow), and a q8 KV row holding Inf keeps it (its scale is Inf).
TEST(Q4_0, TinyBlocksAreZeroAndInfKvRowsPropagate) {
  std::vector<float> x(32, 0.f);
  x[0] = -1e-38f, x[5] = 5e-39f;
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q4_0, 1, 32, x.data());
  for (int j = 0; j < 16; ++j) EXPECT_EQ(w.row(0)[2 + j], 0x88) << j;  // nibble 8 = 0
  std::vector<float> row(8, 1.f);
  row[2] = std::numeric_limits<float>::infinity();
  std::vector<int8_t> q(8);
  EXPECT_TRUE(std::isinf(quantize_kv_row(row.data(), 8, q.data())));
}

// make-model --weights writes what quantize writes from the same preset:
// the same blocks, and a folder that loads without the float file.
TEST(Quantize, MakeModelWritesTheBlocksQuantizeWrites) {
  for (const std::string weights : {"q8", "q4"}) {
    SCOPED_TRACE(weights);
    const std::string src = test::tiny_model_dir("tiny-gemma4-moe", 0, "bf16");
    MakeModelOptions o;
    o.preset = "tiny-gemma4-moe";
    o.out_dir = test::temp_dir("made-" + weights);
    o.dtype = DType::BF16;
    o.weights = weights;
    make_model(o);
    expect_same_weights(Model::load(quantized_copy(src, weights)).weights(), Model::load(o.out_dir).weights());
    const nlohmann::json cfg = nlohmann::json::parse(test::read_file(o.out_dir + "/config.json"));
    EXPECT_EQ(cfg["splitdec_quantization"]["weights"], weights);
  }
  MakeModelOptions bad;
  bad.preset = "tiny-gemma4";
  bad.out_dir = test::temp_dir("made-bad");
  bad.weights = "q3";
  EXPECT_THROW(make_model(bad), InputError);
}
