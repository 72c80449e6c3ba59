// splitdec's public C++ API: load a model, open a conversation, append text
// or media, generate with a callback, rewind.
//
//   auto engine = splitdec::Engine::load("models/tiny");
//   splitdec::Conversation chat(engine);
//   chat.append_user_turn("What is in <image:cat.npy>?");
//   std::string reply = chat.generate({.max_new_tokens = 64},
//                                     [](const std::string& piece) { std::cout << piece; });
//
// splitdec/batch.h adds exact token inputs and batches that move together.
// Errors are thrown as the types in splitdec/error.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "splitdec/error.h"
#include "splitdec/modality.h"
#include "splitdec/options.h"
#include "splitdec/prompt_part.h"

namespace splitdec {

// Exact inputs of one turn for `batch` sequences of `seq` positions each:
// token ids, the modality of each position, left padding (attention_mask 0)
// and the media rows spliced in at the non-text positions.
struct TokenInputs {
  int batch = 0, seq = 0;
  std::vector<int> tokens;              // [batch * seq]
  std::vector<Modality> modality;       // [batch * seq]
  std::vector<uint8_t> attention_mask;  // [batch * seq]; empty: no padding
  std::vector<int> block_ids;           // [batch * seq] explicit media blocks; empty: from modality
  std::vector<float> media;             // [n, hidden] post-projector rows, batch-major, in position order
  int max_new_tokens = -1;              // this turn's budget; -1: the GenerateOptions' value
};

// How media files become soft tokens.
struct MediaOptions {
  // Gemma-4 soft tokens per image: 70, 140, 280, 560 or 1120 (0: the
  // model's default, from preprocessor_config.json or config.json).
  int image_tokens = 0;
  // Gemma-3 only: HF's do_pan_and_scan (off by default, as in HF). A wide or
  // tall image also gives 2-4 crops, each 256 more soft tokens.
  bool pan_and_scan = false;
  // Told how each image / audio file's tower goes: (the file, layers done,
  // layers in all), before the first layer and after each; with pan-and-scan
  // once per crop. For showing progress: one 896 px Gemma-3 image takes
  // minutes on two cores. Called on the encoding thread.
  std::function<void(const std::string& file, int layers_done, int layers)> progress{};
};

// A media file's post-projector rows, as the decoder receives them.
struct MediaRows {
  int64_t rows = 0;
  int hidden = 0;
  std::vector<float> data;  // [rows, hidden]
};

// One user turn for a chat template.
struct ChatTurn {
  std::string system;  // empty: no system turn
  // Media files placed before the text: images (PNG / JPEG) and audio (WAV /
  // FLAC) go through the model's frontends; .npy / .safetensors files are
  // post-projector embeddings, used as they are.
  std::vector<std::string> images, audio;
  std::string text;  // <image:FILE> / <audio:FILE> insert media in place
  MediaOptions media;
};

// How Engine::load stores the weights.
struct LoadOptions {
  // Checkpoint: as the folder stores them (f32, bf16, f16, or the blocks
  // `splitdec quantize` wrote); Q8: the decoder's matrices (linear layers
  // and the embedding / LM head) quantized to 8-bit blocks as they load
  // (Q8_0: 32 weights and one f16 scale per block, llama.cpp's layout),
  // about half of bf16's bytes; Q4: the linear layers as 4-bit blocks
  // (Q4_0), the embedding / LM head as Q8_0. Decode steps quantize
  // activations to 8-bit blocks for integer dot products (as llama.cpp
  // does); Q8F32Act / Q4F32Act keep f32 activations. Tensors a folder
  // holds quantized load as stored. docs/quantization.md.
  WeightStorage weights = WeightStorage::Checkpoint;
  // progress(done, total) is called as weight tensors are read.
  std::function<void(size_t, size_t)> progress;
  // An mmproj GGUF (llama.cpp's --mmproj: Gemma-3's vision tower as its
  // converter writes it) beside a GGUF model: images then go through it.
  std::string mmproj;
};

// A loaded model: config.json, weights and tokenizer of a directory.
class Engine {
 public:
  // progress(done, total) is called as weight tensors are read.
  static std::shared_ptr<const Engine> load(const std::string& model_dir,
                                            const std::function<void(size_t, size_t)>& progress = {});
  static std::shared_ptr<const Engine> load(const std::string& model_dir, const LoadOptions& options);
  ~Engine();

  int vocab_size() const;
  int hidden_size() const;
  std::string model_type() const;
  bool has_tokenizer() const;

  // The ids a text prompt feeds (one sequence): BOS, then the text with each
  // <image:FILE> / <audio:FILE> placeholder (FILE an existing .npy /
  // .safetensors embeddings file) expanded to its markers and one soft token
  // per embedding row. With `chat_template`, the text is one user turn of
  // the model's chat template (encode_chat).
  TokenInputs encode_prompt(const std::string& text, bool chat_template, const MediaOptions& media = {}) const;
  // The same prompt given as parts (BOS, then each part in order: text as
  // it is, media files through the model's frontends or as embeddings
  // files): what encode_prompt(text, false) does after prompt_parts(text).
  TokenInputs encode_parts(const std::vector<PromptPart>& parts, const MediaOptions& media = {}) const;
  // One user turn through the checkpoint's chat template (chat_template.jinja
  // or tokenizer_config.json; a built-in per family otherwise) and the
  // family's media expansion, as Hugging Face's apply_chat_template +
  // processor do: the system text, then the media (in order, before the
  // text), then the text, then the model's turn header.
  TokenInputs encode_chat(const ChatTurn& turn) const;
  // A whole conversation in the HF/OpenAI chat form (JSON text: [{"role",
  // "content": "text" | [{"type": "text"|"image"|"audio", ...}]}]); media
  // parts name embeddings files by "path", relative to `base_dir`.
  TokenInputs encode_messages(const std::string& messages_json, const std::string& base_dir = ".",
                              bool add_generation_prompt = true, const MediaOptions& media = {}) const;
  // The rows a media file gives (what a prompt's block of it holds): an
  // image or audio file through the model's frontend, or an embeddings file.
  MediaRows embed_media(const std::string& path, Modality kind, const MediaOptions& media = {}) const;
  // One line: the model's media frontends ("no media frontend ..." when none).
  std::string describe_media() const;
  // Decodes ids to text (the model's tokenizer).
  std::string decode(const std::vector<int>& ids) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The parts of a text with <image:FILE> / <audio:FILE> placeholders: each
// placeholder whose FILE exists is a media part, everything else text.
std::vector<PromptPart> prompt_parts(const std::string& text);

// Sets the worker threads of every engine (0: all cores).
void set_threads(int threads);

struct ConversationOptions {
  ExecutionPlan plan = ExecutionPlan::Split;  // Reference only in a Batch
  int64_t max_length = 4096;                  // KV capacity in positions
  int chunk = 256;                            // prefill chunk size
  std::optional<MaskPolicy> policy;           // unset: the model family's
  KvStorage kv_dtype = KvStorage::F32;        // storage of the shared KV buffer
  bool keep_trace = true;        // false: trace() stays empty (nothing kept per token)
  MediaOptions media;            // how appended image / audio files are encoded
  // Called after each prefill chunk with (positions done, positions in the prompt).
  std::function<void(int64_t, int64_t)> prefill_progress;
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
  // Structured output: the reply is a JSON document of this JSON schema
  // (its text; "object": any JSON object), enforced while sampling (see
  // README, response_format). Empty: free text.
  std::string json_schema;
  bool end_of_turn_stops = false;  // the chat template's end-of-turn token stops too (always in a Conversation)
  bool keep_prompt_logits = false;  // logits at every prompt position (first turn of a Batch)
  bool keep_step_logits = false;    // the logits each token was chosen from

  // Throws InputError naming the option and its range (generate checks too).
  void validate() const;
};

// One prefill chunk or decode step, as the session ran it.
struct TraceStep {
  bool decode = false;
  int64_t begin = 0, end = 0;  // positions
  std::string path;            // masked | gqa | dense-bias | unified
  int64_t kv_bytes_allocated = 0, kv_bytes_copied = 0;
};

// What the last generate produced.
struct Reply {
  std::vector<int> tokens;  // a stop token included
  std::string text;         // cut before a stop string
  std::string stop_reason;  // max_tokens | stop_token | stop_string | length (the KV capacity is full)
  int64_t prompt_tokens = 0;
  double prefill_ms = 0, decode_ms = 0;
  int decode_steps = 0;
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
  // A user turn in the model's chat template, followed by the model's turn
  // header; media staged with append_image / append_audio come first, and
  // <image:FILE> / <audio:FILE> in the text insert media in place. The first
  // turn is rendered whole (exactly what HF feeds); a later one adds what the
  // template writes after the last reply.
  void append_user_turn(const std::string& text);
  // The system turn; only before the first user turn.
  void set_system(const std::string& text);
  // Media (an embeddings file) for the next user turn.
  void append_image(const std::string& path);
  void append_audio(const std::string& path);
  // Exact inputs (one sequence); BOS is not added.
  void append_tokens(const TokenInputs& inputs);

  // Prefills what was appended, then generates. on_text receives the reply
  // as it is produced. Returns the reply. On an error the conversation is
  // as it was before the turn's appends (they are dropped), except where a
  // sliding ring already dropped what that needs: then it keeps what the
  // turn produced.
  std::string generate(const GenerateOptions& options, const std::function<void(const std::string&)>& on_text = {});
  const Reply& last_reply() const;

  // Positions in the KV cache so far (appended text is counted once generate runs).
  int64_t length() const;
  // When the KV cache is full: drops the oldest exchanges (a user turn and
  // the replies to it) after the system turn, whole (so never inside a media
  // block), until the rest holds at most `max_length` positions, then
  // prefills what is kept again, rendered as the template renders those
  // messages. Returns the exchanges dropped (0 when there is none to drop:
  // nothing staged as chat turns, or only the system turn). Anything staged
  // is dropped.
  int forget_oldest_turns(int64_t max_length);
  // Truncates the conversation to `length` positions; drops anything staged.
  // Refused (InputError) inside a media block, whose positions attended to each other.
  void rewind(int64_t length);
  // Every chunk and step so far.
  std::vector<TraceStep> trace() const;
  // The KV cache's plan and size, one line per layer kind.
  std::string describe_memory() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace splitdec
