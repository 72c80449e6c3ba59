// Greedy generation with an exported splitdec package in ONNX Runtime GenAI,
// through its C API (ort_genai_c.h), from the exact-input JSON that
// `splitdec generate --input` takes. Built and run by
// scripts/check_onnxruntime_genai.sh; not part of the splitdec build.
//
//   onnxruntime_genai_driver PKG INPUT.json [STEP_LOGITS.npy]
//
// INPUT.json: one sequence, {"tokens": [[ids...]], "media_embeddings":
// "rows.npy"} or {"turns": [{..., "max_new_tokens": N}, ...]}. Prints
// {"turns": [{"tokens": [generated ids]}, ...]} on stdout. STEP_LOGITS.npy
// receives the logits each token was chosen from, all turns in order, as
// float32 [1, steps, vocab]: the layout of `splitdec generate --step-logits`.
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

void write_npy(const std::string& file, int64_t steps, int64_t vocab, const std::vector<float>& data) {
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

OgaTensor* make_tensor(float* data, int64_t rows, int64_t width) {
  const int64_t shape[2] = {rows, width};
  OgaTensor* t = nullptr;
  check(OgaCreateTensorFromBuffer(data, shape, 2, OgaElementType_float32, &t), "OgaCreateTensorFromBuffer");
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s PKG INPUT.json [STEP_LOGITS.npy]\n", argv[0]);
    return 2;
  }
  const std::string pkg = argv[1], input = argv[2], logits_file = argc == 4 ? argv[3] : "";
  try {
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
    std::vector<float> step_logits;
    int64_t steps = 0, vocab = 0;
    for (size_t k = 0; k < turns.size(); ++k) {
      const Turn& t = turns[k];
      std::copy(t.media.data.begin(), t.media.data.end(), buffer.begin());
      if (k > 0) {  // feed the last generated token before the new turn
        OgaTensor* logits = nullptr;
        check(OgaGenerator_GetLogits(gen, &logits), "OgaGenerator_GetLogits");
        OgaDestroyTensor(logits);
      }
      check(OgaGenerator_AppendTokens(gen, t.tokens.data(), t.tokens.size()), "OgaGenerator_AppendTokens");
      json generated = json::array();
      for (int n = 0; n < t.max_new_tokens && !OgaGenerator_IsDone(gen); ++n) {
        OgaTensor* logits = nullptr;  // [1, 1, vocab]: what the next token is chosen from
        check(OgaGenerator_GetLogits(gen, &logits), "OgaGenerator_GetLogits");
        void* data = nullptr;
        size_t rank = 0;
        int64_t shape[3] = {};
        check(OgaTensorGetShapeRank(logits, &rank), "OgaTensorGetShapeRank");
        if (rank != 3) throw std::runtime_error("logits of rank " + std::to_string(rank) + ", expected [1, 1, vocab]");
        check(OgaTensorGetShape(logits, shape, 3), "OgaTensorGetShape");
        check(OgaTensorGetData(logits, &data), "OgaTensorGetData");
        vocab = shape[2];
        step_logits.insert(step_logits.end(), static_cast<float*>(data), static_cast<float*>(data) + vocab);
        ++steps;
        OgaDestroyTensor(logits);
        check(OgaGenerator_GenerateNextToken(gen), "OgaGenerator_GenerateNextToken");
        const int32_t* next = nullptr;
        size_t count = 0;
        check(OgaGenerator_GetNextTokens(gen, &next, &count), "OgaGenerator_GetNextTokens");
        generated.push_back(next[0]);
      }
      out.push_back({{"tokens", generated}});
    }
    if (!logits_file.empty()) write_npy(logits_file, steps, vocab, step_logits);
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
