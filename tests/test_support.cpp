#include "test_support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "tools/make_model.h"

namespace splitdec::test {

namespace fs = std::filesystem;

namespace {
struct TempRoot {
  fs::path root;
  TempRoot() {
    root = fs::temp_directory_path() / ("splitdec-test-" + std::to_string(::getpid()));
    fs::create_directories(root);
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};
TempRoot& temp_root() {
  static TempRoot r;
  return r;
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  static int counter = 0;
  fs::path p = temp_root().root / (tag + "-" + std::to_string(counter++));
  fs::create_directories(p);
  return p.string();
}

std::string tiny_model_dir(const std::string& preset, uint64_t seed, const std::string& dtype) {
  static std::map<std::string, std::string> made;
  const std::string key = preset + "/" + std::to_string(seed) + "/" + dtype;
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  MakeModelOptions o;
  o.preset = preset;
  o.out_dir = temp_dir(preset);
  o.seed = seed;
  o.dtype = dtype == "bf16" ? DType::BF16 : dtype == "f16" ? DType::F16 : DType::F32;
  make_model(o);
  return made[key] = o.out_dir;
}

const Model& tiny_model(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[preset];
  if (!m) m = std::make_unique<Model>(Model::load(tiny_model_dir(preset)));
  return *m;
}

CommandResult run_splitdec(const std::string& args) {
  const std::string cmd = std::string(SPLITDEC_BINARY) + " " + args + " 2>&1";
  CommandResult r;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.output.append(buf, n);
  const int status = ::pclose(f);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_wav(const std::string& path, const std::vector<float>& samples) {
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  const uint32_t bytes = uint32_t(samples.size() * 2);
  out.write("RIFF", 4), u32(36 + bytes), out.write("WAVE", 4);
  out.write("fmt ", 4), u32(16), u16(1), u16(1), u32(16000), u32(32000), u16(2), u16(16);
  out.write("data", 4), u32(bytes);
  for (float s : samples) {
    const int16_t v = int16_t(std::lround(std::clamp(s, -1.f, 1.f) * 32767.f));
    out.write(reinterpret_cast<const char*>(&v), 2);
  }
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

}  // namespace splitdec::test
