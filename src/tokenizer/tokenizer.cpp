#include "tokenizer/tokenizer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <sstream>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"

namespace splitdec {

// Exactly one of the two is in use: `hf` when set, else `sp`.
struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::unique_ptr<HfTokenizer> hf;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_serialized(const std::string& proto, const std::string& source) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const auto status = t->impl_->sp.LoadFromSerializedProto(proto);
  if (!status.ok()) throw FormatError(source + ": not a SentencePiece model: " + status.ToString());
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::string& json, const std::string& source) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->impl_->hf = HfTokenizer::from_json(json, source);
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::open_dir(const std::string& dir) {
  if (is_gguf_path(dir)) return gguf_tokenizer(*GgufFile::open(dir));
  const auto json_path = std::filesystem::path(dir) / "tokenizer.json";
  if (std::filesystem::exists(json_path)) {
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    t->impl_->hf = HfTokenizer::open(json_path.string());
    return t;
  }
  const auto path = std::filesystem::path(dir) / "tokenizer.model";
  if (!std::filesystem::exists(path)) return nullptr;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return from_serialized(ss.str(), path.string());
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  if (impl_->hf) return impl_->hf->encode(text);
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  if (!status.ok()) throw InputError("tokenizer: cannot encode text: " + status.ToString());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    if (impl_->hf) {
      out += impl_->hf->decode(run);
    } else {
      std::string s;
      impl_->sp.Decode(run, &s);
      out += s;
    }
    run.clear();
  };
  for (int id : ids) {
    if (id < 0 || id >= piece_count()) {
      flush();
      out += "<id:" + std::to_string(id) + ">";
    } else {
      run.push_back(id);
    }
  }
  flush();
  return out;
}

int Tokenizer::piece_count() const { return impl_->hf ? impl_->hf->piece_count() : impl_->sp.GetPieceSize(); }

int Tokenizer::piece_id(const std::string& piece) const {
  if (impl_->hf) return impl_->hf->piece_id(piece);
  const int id = impl_->sp.PieceToId(piece);
  return (id == impl_->sp.unk_id() && piece != impl_->sp.IdToPiece(id)) ? -1 : id;
}

std::string Tokenizer::piece(int id) const {
  if (id < 0 || id >= piece_count()) throw InputError("token id " + std::to_string(id) + " is outside the tokenizer's " +
                                                      std::to_string(piece_count()) + " pieces");
  return impl_->hf ? impl_->hf->piece(id) : impl_->sp.IdToPiece(id);
}

bool Tokenizer::is_special(int id) const {
  if (id < 0 || id >= piece_count()) return true;
  if (impl_->hf) return impl_->hf->is_special(id);
  const auto& sp = impl_->sp;
  if (sp.IsControl(id) || sp.IsUnknown(id) || sp.IsUnused(id)) return true;
  // This SentencePiece has no IsUserDefined: Gemma's user-defined pieces by name.
  const std::string p = sp.IdToPiece(id);
  for (const auto* names : {&gemma_special_pieces(), &gemma4_special_pieces()})
    if (std::find(names->begin(), names->end(), p) != names->end()) return true;
  return false;
}

const std::vector<std::string>& gemma_special_pieces() {
  static const std::vector<std::string> pieces = {
      "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>",
      "<start_of_audio>", "<end_of_audio>", "<audio_soft_token>", "<video_soft_token>"};
  return pieces;
}

const std::vector<std::string>& gemma4_special_pieces() {
  static const std::vector<std::string> pieces = {
      "<|turn>", "<turn|>", "<|image>", "<image|>", "<|image|>", "<|audio>", "<audio|>", "<|audio|>", "<|video|>",
      "<|channel>", "<channel|>", "<|think|>", "<|tool>", "<tool|>", "<|tool_response>", "<tool_response|>"};
  return pieces;
}

namespace {
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& text) : in_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !std::getline(in_, line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::istringstream in_;
  std::string line_;
  bool done_ = false;
};
}  // namespace

std::string train_tokenizer(const std::string& corpus, int vocab_size, unsigned seed, const std::vector<std::string>& special) {
  sentencepiece::SetRandomGeneratorSeed(seed);
  std::string symbols;
  for (const auto& p : special) symbols += (symbols.empty() ? "" : ",") + p;
  const std::string args = "--model_type=bpe --vocab_size=" + std::to_string(vocab_size) +
                           " --hard_vocab_limit=false --byte_fallback=true --num_threads=1"
                           " --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3"
                           " --pad_piece=<pad> --eos_piece=<eos> --bos_piece=<bos> --unk_piece=<unk>"
                           " --character_coverage=1.0 --minloglevel=2"
                           // Gemma's tokenizer keeps text as is: no dummy prefix, no whitespace folding.
                           " --add_dummy_prefix=false --remove_extra_whitespaces=false --normalization_rule_name=identity"
                           " --split_digits=true --allow_whitespace_only_pieces=true --user_defined_symbols=" + symbols;
  LineIterator it(corpus);
  std::string model;
  // The trainer logs its command line to stderr before it reads
  // --minloglevel, and has no API to silence it: mute fd 2 while it runs.
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved >= 0 && devnull >= 0) ::dup2(devnull, 2);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  std::cerr.flush();
  if (saved >= 0) ::dup2(saved, 2), ::close(saved);
  if (devnull >= 0) ::close(devnull);
  if (!status.ok()) throw Error("tokenizer training failed: " + status.ToString());
  return model;
}

}  // namespace splitdec
