// Writes tests/data/ggml_blocks.json: the first blocks of one tensor of each
// llama.cpp block type, as llama-quantize wrote them, with ggml's own
// dequantization of them (the values splitdec's must equal bit for bit).
// Run by hand against a llama.cpp build (not part of the build; CI cannot
// fetch llama.cpp):
//   splitdec make-model --preset gemma3-1b --layers 2 --dtype f32 --out g1
//   splitdec quantize --model g1 --out g1_f32.gguf --weights f32
//   for t in Q4_K_M Q5_K_M Q6_K Q4_1; do llama-quantize g1_f32.gguf g1_$t.gguf $t; done
//   g++ -std=c++20 -I src -I include -I LLAMA/ggml/include scripts/ggml_blocks_fixture.cpp \
//       build/libsplitdec_text.a build/libsplitdec_core.a -LLLAMA/build/bin -lggml-base -lggml -o fixture
//   ./fixture g1_Q4_K_M.gguf g1_Q5_K_M.gguf g1_Q6_K.gguf g1_Q4_1.gguf > tests/data/ggml_blocks.json
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "io/gguf.h"
#include "ggml.h"
using namespace splitdec;
std::string hex(const uint8_t* p, size_t n) { static const char* d = "0123456789abcdef"; std::string s; for (size_t i = 0; i < n; ++i) s += d[p[i] >> 4], s += d[p[i] & 15]; return s; }
int main(int argc, char** argv) {
  nlohmann::json out = nlohmann::json::array();
  std::vector<uint32_t> seen;
  for (int a = 1; a < argc; ++a) {
    auto f = GgufFile::open(argv[a]);
    for (const GgufTensor& t : f->tensors()) {
      if (t.type == 0 || t.type == 1 || t.type == 30 || t.type == 8) continue;
      bool dup = false; for (auto s : seen) dup |= s == t.type; if (dup) continue;
      seen.push_back(t.type);
      const auto* tr = ggml_get_type_traits(static_cast<enum ::ggml_type>(t.type));
      const int64_t values = tr->blck_size == 256 ? 512 : 128;   // two K-blocks or four 32-blocks
      const size_t bytes = size_t(values / tr->blck_size) * tr->type_size;
      std::vector<float> y(static_cast<size_t>(values));
      tr->to_float(t.data, y.data(), values);
      std::vector<uint32_t> bits(y.size()); std::memcpy(bits.data(), y.data(), y.size() * 4);
      out.push_back({{"type", splitdec::ggml_type_name(t.type)}, {"source", std::string(argv[a]).substr(std::string(argv[a]).rfind('/') + 1) + ":" + t.name},
                     {"blocks", hex(t.data, bytes)}, {"f32_bits", bits}});
    }
  }
  std::printf("%s\n", out.dump(1).c_str());
}
