#include "tools/make_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/npy.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/families/presets.h"
#include "tokenizer/gemma_tokenizer_json.h"
#include "io/safetensors.h"
#include "media/frontend_weights.h"
#include "tokenizer/tokenizer.h"
#include "tools/preset_vocabulary.h"
#include "tools/quantize_model.h"
#include "model/quantized_tensors.h"
#include "model/weights.h"

namespace splitdec {

extern const char* const kTokenizerCorpus;  // data/tokenizer_corpus.txt, embedded at build time

namespace {

using nlohmann::ordered_json;

constexpr int kTokenizerVocab = 512;

// splitmix64: a tiny counter-based generator, identical on every platform.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Uniform in [-1, 1), stream keyed by (seed, tensor name, index).
struct Uniform {
  uint64_t key;
  float at(uint64_t i) const { return float(int64_t(splitmix64(key ^ splitmix64(i)) >> 11) * 0x1.0p-52) - 1.f; }
};

void put(uint8_t* bytes, size_t i, float v, DType dt) {
  if (dt == DType::F32) std::memcpy(bytes + 4 * i, &v, 4);
  else {
    const uint16_t h = dt == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(bytes + 2 * i, &h, 2);
  }
}

// One random tensor: element i is value(u.at(i)) for the tensor's own
// uniform stream u (keyed by the seed and the name).
struct RandomTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::function<float(float r)> value;
};

// Random media-frontend tensors with the checkpoint's names and shapes (the
// list the loader walks, so both agree), scaled like the decoder's: linear
// weights ~ 1/sqrt(fan_in), norm gains near 1, clip bounds at +-3 so that
// clipping happens now and then.
std::vector<RandomTensor> frontend_random_tensors(const FrontendConfig& frontend) {
  FrontendWeights scratch;
  std::vector<RandomTensor> out;
  for (const FrontendTensor& spec : frontend_tensors(frontend, scratch)) {
    int64_t fan_in = 1;
    if (spec.kind == FrontendTensor::TransposedMatrix) fan_in = spec.shape[0];
    else
      for (size_t d = 1; d < spec.shape.size(); ++d) fan_in *= spec.shape[d];
    const float linear = std::sqrt(3.f / float(fan_in));
    out.push_back({spec.name, spec.shape, [kind = spec.kind, linear](float r) {
                     switch (kind) {
                       case FrontendTensor::Matrix:
                       case FrontendTensor::TransposedMatrix: return r * linear;
                       case FrontendTensor::Bias: return 0.02f * r;
                       case FrontendTensor::Gain: return 1.f + 0.1f * r;
                       case FrontendTensor::GainMinusOne: return 0.1f * r;
                       case FrontendTensor::Table: return 0.5f * r;
                       case FrontendTensor::ClipLow: return -3.f;
                       case FrontendTensor::ClipHigh: return 3.f;
                     }
                     return 0.f;
                   }});
  }
  return out;
}

// Random weights for every tensor the config needs, in checkpoint names,
// streamed to the file a few MiB at a time: the full-size presets (24 GB
// for gemma4-12b in bf16) are written on a machine with less memory.
void write_random_weights(const ModelConfig& config, const FrontendConfig& frontend, const std::string& path, DType dtype,
                          uint64_t seed, const std::string& weights, const std::function<void(size_t, size_t)>& progress) {
  const bool text_only = config.model_type == "gemma3_text";
  const std::string prefix = text_only ? "model." : "model.language_model.";
  const float H = float(config.hidden_size);
  std::vector<RandomTensor> tensors;
  for (const WeightSpec& spec : decoder_weight_specs(config)) {
    // Scales keep every activation near unit RMS so that logits are finite
    // and informative: linear weights ~ 1/sqrt(fan_in), embeddings ~
    // 1/sqrt(hidden) (times sqrt(hidden) at lookup), norm gains near 1.
    const bool q_norm = spec.name.find("q_norm") != std::string::npos;
    const int head_dim = spec.shape[0] > 0 ? int(spec.shape[0]) : 1;
    const float linear = spec.kind == WeightSpec::Linear || spec.kind == WeightSpec::Router
                             ? std::sqrt(3.f / float(spec.shape[1]))
                         : spec.kind == WeightSpec::Experts ? std::sqrt(3.f / float(spec.shape[2]))
                                                            : 0.f;
    const float embedding = std::sqrt(3.f / H);
    const float table = config.per_layer_dim > 0 ? std::sqrt(3.f / float(config.per_layer_dim)) : 0.f;
    // Gemma-4 attention has scale 1: a q_norm gain of 2/sqrt(head_dim)
    // keeps scores at a useful spread.
    const float gain = q_norm ? 2.f / std::sqrt(float(head_dim)) : 1.f;
    tensors.push_back({prefix + spec.name, spec.shape,
                       [kind = spec.kind, linear, embedding, table, gain, adds_one = config.norm_adds_one](float r) {
                         switch (kind) {
                           case WeightSpec::Linear: return r * linear;
                           case WeightSpec::Embedding: return r * embedding;
                           case WeightSpec::Norm: return adds_one ? 0.1f * r : gain * (1.f + 0.1f * r);
                           case WeightSpec::Scalar: return 0.75f + 0.25f * r;
                           case WeightSpec::Experts:
                           case WeightSpec::Router: return r * linear;
                           case WeightSpec::MappedTable: return r * table;  // times sqrt(P) at lookup
                         }
                         return 0.f;
                       }});
  }
  for (RandomTensor& t : frontend_random_tensors(frontend)) tensors.push_back(std::move(t));
  // With --weights, the decoder's matrices go out as splitdec quantize writes
  // them (values, then scales) from the values rounded to `dtype`.
  std::map<std::string, WeightFormat> quantized;
  if (!weights.empty()) {
    const WeightLoading scheme = weight_loading_named(weights);
    if (!scheme.format || scheme.f32_activations) throw InputError("--weights " + weights + ": make-model writes q8 or q4");
    for (const auto& [name, embedding] : decoder_matrix_names(config, prefix)) {
      const WeightFormat f = embedding ? scheme.embedding_format.value_or(*scheme.format) : *scheme.format;
      for (const RandomTensor& t : tensors)
        if (t.name == name && weight_format_fits(f, int(t.shape.back()))) quantized[name] = f;
    }
  }
  std::vector<SafetensorsWriter::Entry> entries;
  for (const RandomTensor& t : tensors) {
    const auto q = quantized.find(t.name);
    if (q == quantized.end()) {
      entries.push_back({t.name, dtype, t.shape});
      continue;
    }
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
    entries.push_back({t.name, quantized_values_dtype(q->second), quantized_values_shape(q->second, rows, t.shape.back())});
    entries.push_back({quantized_scale_name(t.name), DType::F16, {rows, t.shape.back() / 32}});
  }
  SafetensorsWriter out(path, std::move(entries), {{"format", "pt"}});
  constexpr size_t kPiece = size_t(1) << 22;  // elements generated per write
  std::vector<uint8_t> bytes(kPiece * dtype_size(dtype));
  for (size_t k = 0; k < tensors.size(); ++k) {
    const RandomTensor& t = tensors[k];
    if (progress) progress(k, tensors.size());
    size_t n = 1;
    for (int64_t d : t.shape) n *= size_t(d);
    const Uniform u{splitmix64(seed ^ hash_name(t.name))};
    if (const auto q = quantized.find(t.name); q != quantized.end()) {
      const int in = int(t.shape.back()), rows = int(n / size_t(in)), step = convert_piece_rows(in);
      std::vector<uint16_t> scales(size_t(rows) * size_t(in / 32));
      std::vector<float> f32;
      std::vector<uint8_t> values;
      for (int r0 = 0; r0 < rows; r0 += step) {
        const int m = std::min(step, rows - r0);
        f32.resize(size_t(m) * size_t(in));
        const size_t base = size_t(r0) * size_t(in);
        ThreadPool::global()->parallel_for(int64_t(f32.size()), [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) f32[size_t(i)] = round_to_dtype(t.value(u.at(base + size_t(i))), dtype);
        }, 1 << 14);
        WeightMatrix block = WeightMatrix::zeros(q->second, m, in);
        ThreadPool::global()->parallel_for(m, [&](int64_t a, int64_t b) {
          block.set_rows_f32(int(a), int(b - a), f32.data() + size_t(a) * size_t(in));
        });
        values.resize(size_t(m) * (weight_row_bytes(q->second, in) - size_t(in / 32) * 2));
        split_quantized_rows(block, 0, m, values.data(), scales.data() + size_t(r0) * size_t(in / 32));
        out.write(values.data(), values.size());
      }
      out.write(scales.data(), scales.size() * 2);
      continue;
    }
    for (size_t i0 = 0; i0 < n; i0 += kPiece) {
      const size_t m = std::min(kPiece, n - i0);
      ThreadPool::global()->parallel_for(
          int64_t(m), [&](int64_t a, int64_t b) {
            for (int64_t i = a; i < b; ++i) put(bytes.data(), size_t(i), t.value(u.at(i0 + size_t(i))), dtype);
          },
          1 << 14);
      out.write(bytes.data(), m * dtype_size(dtype));
    }
  }
  out.finish();
  if (progress) progress(tensors.size(), tensors.size());
}

}  // namespace

void make_model(const MakeModelOptions& o) {
  const ModelPreset& preset = find_model_preset(o.preset);
  const bool tiny = preset.tiny;
  const DType dtype = o.dtype.value_or(tiny ? DType::F32 : DType::BF16);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw InputError("--out " + o.out_dir + ": cannot create directory: " + ec.message());

  // The tokenizer: a small trained SentencePiece BPE model, written as
  // tokenizer.json (and, for Gemma-3, also as tokenizer.model, as Google's
  // Gemma-3 folders ship both; Gemma-4 folders have only tokenizer.json).
  // Full-size presets get the families' real 262144-piece layout instead.
  const bool gemma4 = preset.family == Family::Gemma4;
  const std::vector<std::string>& special = gemma4 ? gemma4_special_pieces() : gemma_special_pieces();
  const std::string tokenizer_model = train_tokenizer(kTokenizerCorpus, kTokenizerVocab, unsigned(o.seed), special);
  const BpeVocabulary trained = bpe_vocabulary_from_sentencepiece(tokenizer_model, special);
  const bool real_vocabulary = preset.real_vocabulary;
  PresetTokenIds ids{};
  BpeVocabulary vocabulary;
  if (real_vocabulary) {
    vocabulary = preset_vocabulary(gemma4 ? PresetFamily::Gemma4 : PresetFamily::Gemma3, trained);
    const FamilySpecialIds s = family_special_ids(gemma4 ? PresetFamily::Gemma4 : PresetFamily::Gemma3);
    ids = {s.boi, s.eoi, s.image, s.boa, s.eoa, s.audio, s.video};
  } else {
    vocabulary = trained;
    auto tok = Tokenizer::from_serialized(tokenizer_model, "trained tokenizer");
    auto id = [&](const char* piece) { return tok->piece_id(piece); };
    if (gemma4)
      ids = {id("<|image>"), id("<image|>"), id("<|image|>"), id("<|audio>"), id("<audio|>"), id("<|audio|>"), id("<|video|>")};
    else
      ids = {id("<start_of_image>"), id("<end_of_image>"), id("<image_soft_token>"), id("<start_of_audio>"),
             id("<end_of_audio>"), id("<audio_soft_token>"), id("<video_soft_token>")};
  }

  ordered_json cfg_json = preset_config_json(preset, int(vocabulary.size()), ids, o.layers);
  cfg_json["torch_dtype"] = dtype == DType::F32 ? "float32" : dtype == DType::BF16 ? "bfloat16" : "float16";
  const ModelConfig config = parse_model_config(nlohmann::json::parse(cfg_json.dump()), o.preset);

  const FrontendConfig frontend = parse_frontend_config(nlohmann::json::parse(cfg_json.dump()), config, o.preset);
  write_random_weights(config, frontend, (fs::path(o.out_dir) / "model.safetensors").string(), dtype, o.seed, o.weights, o.progress);
  if (!o.weights.empty()) cfg_json["splitdec_quantization"] = quantization_note(o.weights, {});
  {
    std::ofstream out(fs::path(o.out_dir) / "config.json");
    out << cfg_json.dump(2) << "\n";
  }
  {
    std::ofstream out(fs::path(o.out_dir) / "tokenizer.json", std::ios::binary);
    out << gemma_tokenizer_json(vocabulary);
  }
  if (!real_vocabulary && !gemma4) {
    std::ofstream out(fs::path(o.out_dir) / "tokenizer.model", std::ios::binary);
    out << tokenizer_model;
  }
  {
    ordered_json tc = {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"},
                       {"pad_token", "<pad>"},  {"unk_token", "<unk>"},   {"tokenizer_class", "GemmaTokenizer"}};
    if (!o.chat_template.empty() && !gemma4) tc["chat_template"] = o.chat_template;
    std::ofstream out(fs::path(o.out_dir) / "tokenizer_config.json");
    out << tc.dump(2) << "\n";
  }
  if (!o.chat_template.empty() && gemma4) {
    std::ofstream out(fs::path(o.out_dir) / "chat_template.jinja", std::ios::binary);
    out << o.chat_template;
  }
  // A stand-in for one image's post-projector embeddings, for demos and tests.
  const int mm = config.mm_tokens_per_image;
  std::vector<float> image(size_t(mm) * size_t(config.hidden_size));
  const Uniform u{splitmix64(o.seed ^ hash_name("demo_image"))};
  for (size_t i = 0; i < image.size(); ++i) image[i] = std::sqrt(3.f) * u.at(i);
  write_npy((fs::path(o.out_dir) / "demo_image.npy").string(), {mm, config.hidden_size}, image.data());
}

}  // namespace splitdec
