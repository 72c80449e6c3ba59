// Gemma-3's presets: tiny-gemma3 (every feature, SigLIP tower),
// tiny-gemma3-img256 (the same with 256 image tokens, as ONNX Runtime
// GenAI's Gemma-3 processor expands every image, and as the real
// checkpoints have), tiny-gemma3-256 (text, rows of whole K-quant
// super-blocks), and the
// shapes of gemma-3-1b and gemma-3-12b (the 4B/12B/27B SigLIP-So400m tower).
#include "io/families/presets.h"

namespace splitdec {

namespace {

using nlohmann::ordered_json;

void multimodal(PresetDraft& d, const PresetTokenIds& s, int mm_tokens) {
  d.top["model_type"] = "gemma3";
  d.top["boi_token_index"] = s.boi;
  d.top["eoi_token_index"] = s.eoi;
  d.top["image_token_index"] = s.image;
  d.top["mm_tokens_per_image"] = mm_tokens;
  d.text["model_type"] = "gemma3_text";
}

void siglip(PresetDraft& d, ordered_json v) {
  v["model_type"] = "siglip_vision_model";
  v["vision_use_head"] = false;
  d.top["vision_config"] = v;
}

void tiny(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 16);
  d.layers = 6;
  d.pattern = 3;
  d.text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"head_dim", 16}, {"query_pre_attn_scalar", 16}, {"sliding_window", 8},
                 {"sliding_window_pattern", 3}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                 {"rms_norm_eps", 1e-6}});
  // 112 px in 14 px patches: an 8 x 8 grid, pooled 2 x 2 to the 16 tokens.
  siglip(d, {{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
             {"image_size", 112}, {"patch_size", 14}, {"layer_norm_eps", 1e-6}});
}

// tiny-gemma3 with 256 soft tokens an image: 224 px in 7 px patches, a
// 32 x 32 grid pooled 2 x 2 to 16 x 16. ONNX Runtime GenAI's Gemma-3
// processor hard-codes 256 image tokens (gemma_image_processor.cpp), so this
// is the tiny model its multimodal route can run (docs/onnx-export.md).
void tiny_img256(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  tiny(vocab, s, d);
  d.top["mm_tokens_per_image"] = 256;
  d.top["vision_config"]["image_size"] = 224;
  d.top["vision_config"]["patch_size"] = 7;
}

// tiny-gemma3 text-only with rows of 256 and 512: whole K-quant
// super-blocks, so a Q4_K GGUF of it keeps its K-blocks (tiny-gemma3's rows
// of 64 take llama.cpp's 32-value fallbacks).
void tiny_256(int vocab, const PresetTokenIds&, PresetDraft& d) {
  d.top["model_type"] = "gemma3_text";
  d.layers = 6;
  d.pattern = 6;  // Gemma-3's: llama.cpp makes every sixth layer full whatever the file says
  d.top.update({{"vocab_size", vocab}, {"hidden_size", 256}, {"intermediate_size", 512}, {"num_attention_heads", 4},
                {"num_key_value_heads", 2}, {"head_dim", 64}, {"query_pre_attn_scalar", 64}, {"sliding_window", 8},
                {"sliding_window_pattern", 6}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                {"rms_norm_eps", 1e-6}});
}

void gemma3_1b(int, const PresetTokenIds&, PresetDraft& d) {
  d.top["model_type"] = "gemma3_text";
  d.layers = 26;
  d.top.update({{"vocab_size", 262144}, {"hidden_size", 1152}, {"intermediate_size", 6912}, {"num_attention_heads", 4},
                {"num_key_value_heads", 1}, {"head_dim", 256}, {"query_pre_attn_scalar", 256}, {"sliding_window", 512},
                {"sliding_window_pattern", 6}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                {"rms_norm_eps", 1e-6}});
}

void gemma3_12b(int, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 256);
  d.layers = 48;
  d.text.update({{"vocab_size", 262208}, {"hidden_size", 3840}, {"intermediate_size", 15360},
                 {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 256},
                 {"query_pre_attn_scalar", 256}, {"sliding_window", 1024}, {"sliding_window_pattern", 6},
                 {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                 {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}, {"rms_norm_eps", 1e-6}});
  // SigLIP-So400m as Google's Gemma-3 4B/12B/27B checkpoints configure it.
  siglip(d, {{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_hidden_layers", 27}, {"num_attention_heads", 16},
             {"image_size", 896}, {"patch_size", 14}, {"layer_norm_eps", 1e-6}});
}

}  // namespace

std::vector<ModelPreset> gemma3_presets() {
  return {{"tiny-gemma3", Family::Gemma3, true, false, tiny},
          {"tiny-gemma3-img256", Family::Gemma3, true, false, tiny_img256},
          {"tiny-gemma3-256", Family::Gemma3, true, false, tiny_256},
          {"gemma3-1b", Family::Gemma3, false, true, gemma3_1b},
          {"gemma3-12b", Family::Gemma3, false, true, gemma3_12b}};
}

}  // namespace splitdec
