// splitdec's public C++ API: load a model, open a conversation, append text
// or media, generate with a callback, rewind.
//
//   auto engine = splitdec::Engine::load("models/tiny");
//   splitdec::Conversation chat(engine);
//   chat.append_user_turn("What is in <image:cat.npy>?");
//   std::string reply = chat.generate({.max_new_tokens = 64},
//                                     [](const std::string& piece) { std::cout << piece; });
//
// Errors are thrown as the types in splitdec/error.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "splitdec/error.h"

namespace splitdec {

// A loaded model: config.json, weights and tokenizer.model of a directory.
class Engine {
 public:
  static std::shared_ptr<const Engine> load(const std::string& model_dir);
  ~Engine();

  int vocab_size() const;
  int hidden_size() const;
  std::string model_type() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ConversationOptions {
  std::string plan = "split";  // single | split | split-copy | unified
  int64_t max_length = 4096;   // KV capacity in positions
  int chunk = 256;             // prefill chunk size
  std::string policy;          // mask policy; empty: the model family's
};

struct GenerateOptions {
  int max_new_tokens = 64;
  float temperature = 0.f;  // 0 with no other sampling option: greedy
  int top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  float repetition_penalty = 1.f;
  uint64_t seed = 0;
  std::vector<std::string> stop;  // stop strings
};

enum class MediaKind { Image, Audio };

// One conversation over a KV cache kept between calls: each append and
// generate costs only its new tokens.
class Conversation {
 public:
  explicit Conversation(std::shared_ptr<const Engine> engine, ConversationOptions options = {});
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // Raw text (BOS first when the conversation is empty); <image:FILE> and
  // <audio:FILE> placeholders insert media embeddings from .npy/.safetensors.
  void append_text(const std::string& text);
  // Post-projector embeddings, `rows` x hidden_size floats, wrapped in the
  // media markers.
  void append_media(const std::vector<float>& embeddings, int64_t rows, MediaKind kind = MediaKind::Image);
  // A user turn in the Gemma chat template, followed by the model's header.
  void append_user_turn(const std::string& text);

  // Prefills what was appended, then generates. on_text receives the reply
  // as it is produced. Returns the reply.
  std::string generate(const GenerateOptions& options, const std::function<void(const std::string&)>& on_text = {});

  // Positions in the KV cache so far (appended text is counted once generate runs).
  int64_t length() const;
  // Truncates the conversation to `length` positions.
  void rewind(int64_t length);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace splitdec
