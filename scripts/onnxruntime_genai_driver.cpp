// Greedy generation with an exported splitdec package in ONNX Runtime GenAI,
// through its C API (ort_genai_c.h), from the exact-input JSON that
// `splitdec generate --input` takes. Built and run by
// scripts/check_onnxruntime_genai.sh; not part of the splitdec build.
//
//   onnxruntime_genai_driver PKG INPUT.json [STEP_LOGITS.npy]
//   onnxruntime_genai_driver --multimodal PKG PROMPT IMAGE|- MAX_NEW [STEP_LOGITS.npy]
//   onnxruntime_genai_driver --time PKG PROMPT_TOKENS CHUNK STEPS
//
// INPUT.json: one sequence, {"tokens": [[ids...]], "media_embeddings":
// "rows.npy"} or {"turns": [{..., "max_new_tokens": N}, ...]}. Prints
// {"turns": [{"tokens": [generated ids]}, ...]} on stdout. STEP_LOGITS.npy
// receives the logits each token was chosen from, all turns in order, as
// float32 [1, steps, vocab]: the layout of `splitdec generate --step-logits`.
//
// --multimodal: GenAI's own route for a `--genai-route multimodal` package,
// as its users run it: OgaCreateMultiModalProcessor, OgaLoadImage (IMAGE, or
// - for none), OgaProcessorProcessImages(PROMPT), OgaGenerator_SetInputs,
// greedy. PROMPT is the text GenAI tokenizes (it adds no <bos>: write it);
// each <start_of_image> in it becomes an image. Prints {"input_ids": [the
// processor's ids], "tokens": [generated ids]}.
//
// --time: wall time of a text prompt of PROMPT_TOKENS ids (AppendTokens of
// CHUNK ids at a time: the prompt stages; after one untimed chunk on
// another generator) and of each of STEPS generation steps
// (GenerateNextToken: one token run each), greedy, no early stop. The ids:
// 2 (<bos>), then 100 + (k * 7919) % 5000.
// Prints {"prompt_ms": ..., "chunk_ms": [...], "step_ms": [...]}.
//
// What a caller binds, per the package's rules (docs/onnx-export.md):
// - media_embeds only, [rows, hidden] float32: the turn's media rows in
//   order; the graphs find media positions and blocks from the token ids.
// - Bound once, before the first turn, as one buffer with room for the
//   largest turn, which the driver rewrites before each turn: ONNX Runtime
//   GenAI binds extra inputs on the first run only (a later
//   OgaGenerator_SetModelInput is never bound), and OgaCreateTensorFromBuffer
//   wraps the caller's memory, so the rewritten rows are what it reads.
// - Before a later turn the last generated token is fed first
//   (OgaGenerator_GetLogits runs it), as splitdec does; ONNX Runtime GenAI
//   would otherwise place the new turn after a token the model never saw.
#include <ort_genai_c.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

void check(OgaResult* r, const char* what) {
  if (r == nullptr) return;
  const std::string msg = OgaResultGetError(r);
  OgaDestroyResult(r);
  throw std::runtime_error(std::string(what) + ": " + msg);
}

struct Rows {
  int64_t count = 0, width = 0;
  std::vector<float> data;
};

// A little-endian float32 .npy of shape [n, width], C order.
Rows read_npy(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string b = ss.str();
  if (b.size() < 10 || b.compare(1, 5, "NUMPY") != 0) throw std::runtime_error(file + ": not a .npy file");
  const bool v1 = b[6] == 1;
  const size_t header_len = v1 ? size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8
                               : size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8 | size_t(uint8_t(b[10])) << 16 |
                                     size_t(uint8_t(b[11])) << 24;
  const size_t start = (v1 ? 10 : 12) + header_len;
  const std::string header = b.substr(v1 ? 10 : 12, header_len);
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': True") != std::string::npos)
    throw std::runtime_error(file + ": media rows must be little-endian float32 in C order");
  const size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
  Rows r;
  if (std::sscanf(header.substr(open, close - open + 1).c_str(), "(%ld, %ld)", &r.count, &r.width) != 2)
    throw std::runtime_error(file + ": shape must be [n, hidden]");
  const size_t bytes = size_t(r.count * r.width) * sizeof(float);
  if (b.size() < start + bytes) throw std::runtime_error(file + ": truncated");
  r.data.resize(size_t(r.count * r.width));
  std::memcpy(r.data.data(), b.data() + start, bytes);
  return r;
}

struct Turn {
  std::vector<int32_t> tokens;
  Rows media;
  int max_new_tokens = 16;
};

std::vector<Turn> read_turns(const std::string& file, int64_t hidden) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open " + file);
  const json j = json::parse(in);
  const json turns = j.contains("turns") ? j["turns"] : json::array({j});
  const std::string dir = file.find('/') == std::string::npos ? "." : file.substr(0, file.rfind('/'));
  std::vector<Turn> out;
  for (const json& t : turns) {
    Turn turn;
    if (t.at("tokens").size() != 1) throw std::runtime_error("input: exactly one sequence per turn");
    for (const json& id : t["tokens"][0]) turn.tokens.push_back(id.get<int32_t>());
    if (t.contains("media_embeddings")) {
      const std::string p = t["media_embeddings"].get<std::string>();
      turn.media = read_npy(p[0] == '/' ? p : dir + "/" + p);
      if (turn.media.width != hidden)
        throw std::runtime_error("media rows are " + std::to_string(turn.media.width) + " wide, the model's hidden size is " +
                                 std::to_string(hidden));
    }
    turn.media.width = hidden;
    if (t.contains("max_new_tokens")) turn.max_new_tokens = t["max_new_tokens"].get<int>();
    out.push_back(std::move(turn));
  }
  return out;
}

// The logits each generated token was chosen from, all turns in order.
struct StepLogits {
  int64_t vocab = 0;
  std::vector<float> data;  // [steps, vocab]
};

void write_npy(const std::string& file, const StepLogits& logits) {
  const int64_t steps = logits.vocab ? int64_t(logits.data.size()) / logits.vocab : 0, vocab = logits.vocab;
  const std::vector<float>& data = logits.data;
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, " + std::to_string(steps) + ", " +
                       std::to_string(vocab) + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // 64-byte aligned data, as numpy writes it
  header += '\n';
  std::ofstream out(file, std::ios::binary);
  const uint16_t len = uint16_t(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(char(len & 0xff)).put(char(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + file);
}

// The logits the next token is chosen from, [1, 1, vocab], appended to `all`.
void append_logits(OgaGenerator* gen, StepLogits& all) {
  OgaTensor* logits = nullptr;
  check(OgaGenerator_GetLogits(gen, &logits), "OgaGenerator_GetLogits");
  void* data = nullptr;
  size_t rank = 0;
  int64_t shape[3] = {};
  check(OgaTensorGetShapeRank(logits, &rank), "OgaTensorGetShapeRank");
  if (rank != 3) throw std::runtime_error("logits of rank " + std::to_string(rank) + ", expected [1, 1, vocab]");
  check(OgaTensorGetShape(logits, shape, 3), "OgaTensorGetShape");
  check(OgaTensorGetData(logits, &data), "OgaTensorGetData");
  all.data.insert(all.data.end(), static_cast<float*>(data), static_cast<float*>(data) + shape[2]);
  all.vocab = shape[2];
  OgaDestroyTensor(logits);
}

// Greedy generation of `max_new` tokens after what the generator holds.
json generate(OgaGenerator* gen, int max_new, StepLogits& step_logits) {
  json generated = json::array();
  for (int n = 0; n < max_new && !OgaGenerator_IsDone(gen); ++n) {
    append_logits(gen, step_logits);
    check(OgaGenerator_GenerateNextToken(gen), "OgaGenerator_GenerateNextToken");
    const int32_t* next = nullptr;
    size_t count = 0;
    check(OgaGenerator_GetNextTokens(gen, &next, &count), "OgaGenerator_GetNextTokens");
    generated.push_back(next[0]);
  }
  return generated;
}

json run_multimodal(const std::string& pkg, const std::string& prompt, const std::string& image, int max_new,
                    StepLogits& step_logits) {
  OgaModel* model = nullptr;
  check(OgaCreateModel(pkg.c_str(), &model), "OgaCreateModel");
  OgaMultiModalProcessor* processor = nullptr;
  check(OgaCreateMultiModalProcessor(model, &processor), "OgaCreateMultiModalProcessor");
  OgaImages* images = nullptr;
  if (image != "-") check(OgaLoadImage(image.c_str(), &images), "OgaLoadImage");
  OgaNamedTensors* inputs = nullptr;
  check(OgaProcessorProcessImages(processor, prompt.c_str(), images, &inputs), "OgaProcessorProcessImages");
  // The ids the processor made (the prompt with each image expanded).
  OgaTensor* ids = nullptr;
  check(OgaNamedTensorsGet(inputs, "input_ids", &ids), "OgaNamedTensorsGet(input_ids)");
  int64_t shape[2] = {};
  void* data = nullptr;
  OgaElementType type{};
  check(OgaTensorGetType(ids, &type), "OgaTensorGetType(input_ids)");
  if (type != OgaElementType_int32) throw std::runtime_error("the processor's input_ids are not int32");
  check(OgaTensorGetShape(ids, shape, 2), "OgaTensorGetShape(input_ids)");
  check(OgaTensorGetData(ids, &data), "OgaTensorGetData(input_ids)");
  json input_ids = json::array();
  for (int64_t k = 0; k < shape[1]; ++k) input_ids.push_back(static_cast<const int32_t*>(data)[k]);
  OgaDestroyTensor(ids);

  OgaGeneratorParams* params = nullptr;
  check(OgaCreateGeneratorParams(model, &params), "OgaCreateGeneratorParams");
  OgaGenerator* gen = nullptr;
  check(OgaCreateGenerator(model, params, &gen), "OgaCreateGenerator");
  check(OgaGenerator_SetInputs(gen, inputs), "OgaGenerator_SetInputs");
  const json tokens = generate(gen, max_new, step_logits);
  OgaDestroyGenerator(gen);
  OgaDestroyGeneratorParams(params);
  OgaDestroyNamedTensors(inputs);
  if (images) OgaDestroyImages(images);
  OgaDestroyMultiModalProcessor(processor);
  OgaDestroyModel(model);
  return {{"input_ids", input_ids}, {"tokens", tokens}};
}

OgaTensor* make_tensor(float* data, int64_t rows, int64_t width) {
  const int64_t shape[2] = {rows, width};
  OgaTensor* t = nullptr;
  check(OgaCreateTensorFromBuffer(data, shape, 2, OgaElementType_float32, &t), "OgaCreateTensorFromBuffer");
  return t;
}

json run_timed(const std::string& pkg, int prompt_tokens, int chunk, int steps) {
  if (prompt_tokens < 1 || chunk < 1 || steps < 0)
    throw std::runtime_error("--time: PROMPT_TOKENS and CHUNK must be >= 1, STEPS >= 0 (got " + std::to_string(prompt_tokens) +
                             ", " + std::to_string(chunk) + ", " + std::to_string(steps) + ")");
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  OgaModel* model = nullptr;
  check(OgaCreateModel(pkg.c_str(), &model), "OgaCreateModel");
  OgaGeneratorParams* params = nullptr;
  check(OgaCreateGeneratorParams(model, &params), "OgaCreateGeneratorParams");
  // A text prompt binds no media rows: [0, hidden] (the package's rule).
  const json cfg = json::parse(std::ifstream(pkg + "/genai_config.json"));
  const int64_t hidden = cfg["model"]["decoder"]["hidden_size"].get<int64_t>();
  std::vector<float> none(static_cast<size_t>(hidden));
  OgaTensor* media = make_tensor(none.data(), 0, hidden);
  std::vector<int32_t> ids(static_cast<size_t>(prompt_tokens));
  for (int k = 0; k < prompt_tokens; ++k) ids[size_t(k)] = k == 0 ? 2 : 100 + (k * 7919) % 5000;  // <bos>, then text
  // A first generator runs one chunk untimed, as a server's earlier request
  // would: ONNX Runtime's first run of a shape (and the page faults of
  // GenAI's logits buffer for it) is not what a prompt costs.
  OgaGenerator* gen = nullptr;
  check(OgaCreateGenerator(model, params, &gen), "OgaCreateGenerator");
  check(OgaGenerator_SetModelInput(gen, "media_embeds", media), "OgaGenerator_SetModelInput");
  check(OgaGenerator_AppendTokens(gen, ids.data(), std::min(ids.size(), static_cast<size_t>(chunk))), "OgaGenerator_AppendTokens");
  OgaDestroyGenerator(gen);
  check(OgaCreateGenerator(model, params, &gen), "OgaCreateGenerator");
  check(OgaGenerator_SetModelInput(gen, "media_embeds", media), "OgaGenerator_SetModelInput");
  // In runs of at most `chunk` ids, as a server feeds a long prompt (and as
  // older packages need: their logits were [1, run length, vocab], 16 GiB
  // for one 16K run of a 262144-piece vocabulary).
  json chunk_ms = json::array();
  double prompt_ms = 0;
  for (size_t from = 0; from < ids.size(); from += static_cast<size_t>(chunk)) {
    const size_t n = std::min(ids.size() - from, static_cast<size_t>(chunk));
    const auto t0 = clock::now();
    check(OgaGenerator_AppendTokens(gen, ids.data() + from, n), "OgaGenerator_AppendTokens");
    chunk_ms.push_back(ms(clock::now() - t0));
    prompt_ms += chunk_ms.back().get<double>();
  }
  json step_ms = json::array();
  for (int n = 0; n < steps; ++n) {
    const auto t0 = clock::now();
    check(OgaGenerator_GenerateNextToken(gen), "OgaGenerator_GenerateNextToken");
    step_ms.push_back(ms(clock::now() - t0));
  }
  OgaDestroyTensor(media);
  OgaDestroyGenerator(gen);
  OgaDestroyGeneratorParams(params);
  OgaDestroyModel(model);
  return {{"prompt_ms", prompt_ms}, {"chunk_ms", chunk_ms}, {"step_ms", step_ms}};
}

}  // namespace

int main(int argc, char** argv) {
  const bool multimodal = argc > 1 && std::string(argv[1]) == "--multimodal";
  const bool timed = argc > 1 && std::string(argv[1]) == "--time";
  if (timed ? argc != 6 : multimodal ? argc != 6 && argc != 7 : argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s PKG INPUT.json [STEP_LOGITS.npy]\n"
                 "       %s --multimodal PKG PROMPT IMAGE|- MAX_NEW [STEP_LOGITS.npy]\n"
                 "       %s --time PKG PROMPT_TOKENS CHUNK STEPS\n", argv[0], argv[0], argv[0]);
    return 2;
  }
  try {
    if (timed) {
      std::cout << run_timed(argv[2], std::stoi(argv[3]), std::stoi(argv[4]), std::stoi(argv[5])).dump() << "\n";
      OgaShutdown();
      return 0;
    }
    StepLogits step_logits;
    if (multimodal) {
      const json out = run_multimodal(argv[2], argv[3], argv[4], std::stoi(argv[5]), step_logits);
      if (argc == 7) write_npy(argv[6], step_logits);
      std::cout << out.dump() << "\n";
      OgaShutdown();
      return 0;
    }
    const std::string pkg = argv[1], input = argv[2], logits_file = argc == 4 ? argv[3] : "";
    const json cfg = json::parse(std::ifstream(pkg + "/genai_config.json"));
    const int64_t hidden = cfg["model"]["decoder"]["hidden_size"].get<int64_t>();
    const std::vector<Turn> turns = read_turns(input, hidden);

    OgaModel* model = nullptr;
    check(OgaCreateModel(pkg.c_str(), &model), "OgaCreateModel");
    OgaGeneratorParams* params = nullptr;
    check(OgaCreateGeneratorParams(model, &params), "OgaCreateGeneratorParams");
    OgaGenerator* gen = nullptr;
    check(OgaCreateGenerator(model, params, &gen), "OgaCreateGenerator");

    // Bound once: room for the largest turn's rows.
    int64_t capacity = 0;
    for (const Turn& t : turns) capacity = std::max(capacity, t.media.count);
    std::vector<float> buffer(size_t(std::max<int64_t>(capacity, 1) * hidden));
    OgaTensor* media = make_tensor(buffer.data(), capacity, hidden);
    check(OgaGenerator_SetModelInput(gen, "media_embeds", media), "OgaGenerator_SetModelInput");

    json out = json::array();
    for (size_t k = 0; k < turns.size(); ++k) {
      const Turn& t = turns[k];
      std::copy(t.media.data.begin(), t.media.data.end(), buffer.begin());
      if (k > 0) {  // feed the last generated token before the new turn
        OgaTensor* logits = nullptr;
        check(OgaGenerator_GetLogits(gen, &logits), "OgaGenerator_GetLogits");
        OgaDestroyTensor(logits);
      }
      check(OgaGenerator_AppendTokens(gen, t.tokens.data(), t.tokens.size()), "OgaGenerator_AppendTokens");
      const json generated = generate(gen, t.max_new_tokens, step_logits);
      out.push_back({{"tokens", generated}});
    }
    if (!logits_file.empty()) write_npy(logits_file, step_logits);
    std::cout << json{{"turns", out}}.dump() << "\n";
    OgaDestroyTensor(media);
    OgaDestroyGenerator(gen);
    OgaDestroyGeneratorParams(params);
    OgaDestroyModel(model);
    OgaShutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnxruntime_genai_driver: %s\n", e.what());
    return 1;
  }
  return 0;
}
