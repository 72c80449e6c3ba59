// llama.cpp's multimodal library (libmtmd) on a text GGUF, its mmproj and
// one image, for scripts/peer_llama_mmproj.sh: prints one JSON object with
// the prompt's token ids (-1 for each media position), the media's rows as
// the projector gives them (image_rows: an image's or an audio clip's), and `steps` greedy steps (token, and the
// log-probabilities of the top 8 tokens), and the image encode's time
// (encode_ms, the tower and projector). Built by that script against a
// llama.cpp checkout; not part of splitdec's build.
//   llama_mtmd_driver MODEL.gguf MMPROJ.gguf IMAGE PROMPT STEPS
// PROMPT holds mtmd's media marker (<__media__>) where the image goes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf MMPROJ.gguf IMAGE PROMPT STEPS\n", argv[0]);
    return 2;
  }
  const int steps = std::atoi(argv[5]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* lctx = llama_init_from_model(model, cp);
  mtmd_context_params tp = mtmd_context_params_default();
  tp.use_gpu = false;
  tp.n_threads = 2;
  tp.warmup = false;
  // A Gemma-4 image smaller than clip.cpp's 70-token floor stays its size
  // (as Hugging Face's processor keeps it) when this is set lower.
  if (const char* min_tokens = std::getenv("MTMD_IMAGE_MIN_TOKENS")) tp.image_min_tokens = std::atoi(min_tokens);
  mtmd_context* ctx = mtmd_init_from_file(argv[2], model, tp);
  if (!lctx || !ctx) return 1;
  mtmd_helper_bitmap_wrapper image = mtmd_helper_bitmap_init_from_file(ctx, argv[3], false, mtmd_helper_init_opt_default());
  if (!image.bitmap) return 1;

  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  const std::string prompt = argv[4];
  const mtmd_input_text text{prompt.c_str(), prompt.size(), /*add_special=*/true, /*parse_special=*/true};
  const mtmd_bitmap* bitmaps[] = {image.bitmap};
  if (mtmd_tokenize(ctx, chunks, &text, bitmaps, 1) != 0) return 1;

  std::string out = "{\"tokens\":[";
  std::string rows;
  double encode_ms = 0;
  for (size_t c = 0; c < mtmd_input_chunks_size(chunks); ++c) {
    const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks, c);
    if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* ids = mtmd_input_chunk_get_tokens_text(chunk, &n);
      for (size_t k = 0; k < n; ++k) out += std::to_string(ids[k]) + ",";
      continue;
    }
    const size_t n = mtmd_input_chunk_get_n_tokens(chunk);
    for (size_t k = 0; k < n; ++k) out += "-1,";
    const auto t0 = std::chrono::steady_clock::now();
    if (mtmd_encode_chunk(ctx, chunk) != 0) return 1;
    encode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const float* embd = mtmd_get_output_embd(ctx);
    const int hidden = llama_model_n_embd(model);
    for (size_t r = 0; r < n; ++r) {
      rows += rows.empty() ? "[" : ",[";
      for (int k = 0; k < hidden; ++k) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.9g", k ? "," : "", embd[r * size_t(hidden) + size_t(k)]);
        rows += buf;
      }
      rows += "]";
    }
  }
  if (out.back() == ',') out.pop_back();
  out += "],\"encode_ms\":" + std::to_string(encode_ms) + ",\"image_rows\":[" + rows + "],\"steps\":[";

  llama_pos n_past = 0;
  // STEPS 0: the encode alone (for timing it), no decoder pass.
  if (steps > 0 && mtmd_helper_eval_chunks(ctx, lctx, chunks, 0, 0, 512, true, &n_past) != 0) return 1;
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  for (int s = 0; s < steps; ++s) {
    const float* logits = llama_get_logits_ith(lctx, -1);
    const double top = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (int k = 0; k < vocab; ++k) sum += std::exp(double(logits[k]) - top);
    std::vector<int> order(static_cast<size_t>(vocab));
    for (int k = 0; k < vocab; ++k) order[size_t(k)] = k;
    std::partial_sort(order.begin(), order.begin() + 8, order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    llama_token next = order[0];
    out += std::string(s ? "," : "") + "{\"token\":" + std::to_string(next) + ",\"logprobs\":{";
    for (int k = 0; k < 8; ++k) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s\"%d\":%.9g", k ? "," : "", order[size_t(k)],
                    double(logits[order[size_t(k)]]) - top - std::log(sum));
      out += buf;
    }
    out += "}}";
    llama_batch batch = llama_batch_get_one(&next, 1);
    if (llama_decode(lctx, batch) != 0) return 1;
  }
  out += "]}";
  std::printf("%s\n", out.c_str());
  mtmd_input_chunks_free(chunks);
  mtmd_bitmap_free(image.bitmap);
  mtmd_free(ctx);
  llama_free(lctx);
  llama_model_free(model);
  return 0;
}
