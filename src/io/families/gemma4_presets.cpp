// Gemma-4's presets: tiny ones that keep every feature (tiny-gemma4: the
// vision encoder, K=V and KV-shared layers; tiny-gemma4-unified: the seed's
// encoder-free embedders; tiny-gemma4-ple: per-layer embeddings as E2B /
// E4B; tiny-gemma4-moe: experts as 26B-A4B; tiny-gemma4-256: -ple in rows
// of whole K-quant blocks) and the real shapes of the
// checkpoints, as convert_gemma4_weights.py configures them.
#include "io/families/presets.h"

namespace splitdec {

namespace {

using nlohmann::ordered_json;

void multimodal(PresetDraft& d, const PresetTokenIds& s, int mm_tokens) {
  ordered_json &top = d.top, &text = d.text;
  top["model_type"] = "gemma4";
  top["boi_token_id"] = s.boi;
  top["eoi_token_id"] = s.eoi;
  top["image_token_id"] = s.image;
  top["video_token_id"] = s.video;
  top["boa_token_id"] = s.boa;
  top["eoa_token_index"] = s.eoa;
  top["audio_token_id"] = s.audio;
  top["mm_tokens_per_image"] = mm_tokens;
  text["model_type"] = "gemma4_text";
  text["use_bidirectional_attention"] = "vision";
  text["hidden_size_per_layer_input"] = 0;
  text["final_logit_softcapping"] = 30.0;
}

// E2B / E4B attend causally everywhere (use_bidirectional_attention null).
void causal(PresetDraft& d) { d.text["use_bidirectional_attention"] = nullptr; }

// The media frontends: small random towers with the real tensor names on
// the tiny presets, the real shapes on the full-size ones.
void vision(PresetDraft& d, ordered_json v) {
  v["model_type"] = "gemma4_vision";
  v["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 100.0}};
  d.top["vision_config"] = v;
}

// The vision encoders of convert_gemma4_weights.py: on-device (E2B, E4B:
// clipped linears) and large (26B-A4B, 31B: standardize).
void vision_on_device(PresetDraft& d) {
  vision(d, {{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 16}, {"num_attention_heads", 12},
             {"num_key_value_heads", 12}, {"head_dim", 64}, {"patch_size", 16}, {"pooling_kernel_size", 3},
             {"position_embedding_size", 10240}, {"default_output_length", 280}, {"rms_norm_eps", 1e-6},
             {"use_clipped_linears", true}, {"standardize", false}});
}
void vision_large(PresetDraft& d) {
  vision(d, {{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_hidden_layers", 27}, {"num_attention_heads", 16},
             {"num_key_value_heads", 16}, {"head_dim", 72}, {"patch_size", 16}, {"pooling_kernel_size", 3},
             {"position_embedding_size", 10240}, {"default_output_length", 280}, {"rms_norm_eps", 1e-6},
             {"use_clipped_linears", false}, {"standardize", true}});
}

// The E2B / E4B conformer audio encoder (Gemma4AudioConfig), with the class
// defaults written out as transformers saves them.
void conformer_audio(PresetDraft& d, int hidden, int layers, int heads, int channels1, int output_proj_dims) {
  d.top["audio_config"] = {{"model_type", "gemma4_audio"},
                           {"hidden_size", hidden},
                           {"num_hidden_layers", layers},
                           {"num_attention_heads", heads},
                           {"hidden_act", "silu"},
                           {"subsampling_conv_channels", {128, channels1}},
                           {"conv_kernel_size", 5},
                           {"residual_weight", 0.5},
                           {"attention_chunk_size", 12},
                           {"attention_context_left", 13},
                           {"attention_context_right", 0},
                           {"attention_logit_cap", 50.0},
                           {"attention_invalid_logits_value", -1e9},
                           {"use_clipped_linears", true},
                           {"rms_norm_eps", 1e-6},
                           {"gradient_clipping", 1e10},
                           {"output_proj_dims", output_proj_dims}};
}

void unified(PresetDraft& d, int hidden, int embed_dim) {
  d.top["model_type"] = "gemma4_unified";
  d.text["model_type"] = "gemma4_unified_text";
  d.top["vision_config"] = {{"model_type", "gemma4_unified_vision"}, {"patch_size", 16}, {"pooling_kernel_size", 3},
                            {"mm_embed_dim", embed_dim}, {"mm_posemb_size", 1120}, {"output_proj_dims", hidden}};
  d.top["audio_config"] = {{"model_type", "gemma4_unified_audio"}, {"audio_embed_dim", 640}};
}

// Layers s s f s s f; the last two reuse K/V of layers 3 (sliding) and 2 (full).
void tiny_text(int vocab, PresetDraft& d) {
  d.layers = 6;
  d.pattern = 3;
  d.text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"num_global_key_value_heads", 1}, {"head_dim", 16},
                 {"global_head_dim", 32}, {"attention_k_eq_v", true}, {"num_kv_shared_layers", 2},
                 {"sliding_window", 8}, {"rms_norm_eps", 1e-6}});
}

void tiny(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 16);
  tiny_text(vocab, d);
  // Clipped linears (as E2B/E4B) and standardize (as 26B/31B): both paths run.
  vision(d, {{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
             {"num_key_value_heads", 2}, {"head_dim", 16}, {"patch_size", 16}, {"pooling_kernel_size", 3},
             {"position_embedding_size", 10240}, {"rms_norm_eps", 1e-6}, {"use_clipped_linears", true},
             {"standardize", true}});
}

void tiny_unified(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 16);
  tiny_text(vocab, d);
  unified(d, 64, 32);
}

// E2B / E4B in small: per-layer embeddings, KV-shared layers with the
// double-wide MLP, causal attention, the clipped-linear vision encoder and a
// two-layer conformer audio encoder. Layers s s f | s s f: as in E2B / E4B the
// last layer that owns K/V is full and the one before it sliding, the two
// that llama.cpp's Gemma-4 hands the shared layers (llama-model.cpp).
void tiny_ple(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 16);
  causal(d);
  d.layers = 6;
  d.pattern = 3;
  d.text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 1}, {"head_dim", 16}, {"global_head_dim", 32}, {"num_kv_shared_layers", 3},
                 {"use_double_wide_mlp", true}, {"hidden_size_per_layer_input", 16},
                 {"vocab_size_per_layer_input", vocab}, {"sliding_window", 8}, {"rms_norm_eps", 1e-6}});
  vision(d, {{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
             {"num_key_value_heads", 2}, {"head_dim", 16}, {"patch_size", 16}, {"pooling_kernel_size", 3},
             {"position_embedding_size", 10240}, {"rms_norm_eps", 1e-6}, {"use_clipped_linears", true}});
  conformer_audio(d, 32, 2, 4, 4, 24);
}

// tiny-gemma4-ple with rows of 256 and 512 (whole K-quant super-blocks, so
// a Q4_K GGUF of it keeps its K-blocks, as tiny-gemma3-256) and no audio.
void tiny_256(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  tiny_ple(vocab, s, d);
  d.top.erase("audio_config");
  d.text.update({{"hidden_size", 256}, {"intermediate_size", 512}, {"head_dim", 64}, {"global_head_dim", 128},
                 {"hidden_size_per_layer_input", 256}});
}

// 26B-A4B in small: 8 experts, 2 per token, beside the dense MLP.
void tiny_moe(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 16);
  d.layers = 6;
  d.pattern = 3;
  d.text.update({{"vocab_size", vocab}, {"hidden_size", 64}, {"intermediate_size", 64}, {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"num_global_key_value_heads", 1}, {"head_dim", 16},
                 {"global_head_dim", 32}, {"attention_k_eq_v", true}, {"enable_moe_block", true}, {"num_experts", 8},
                 {"top_k_experts", 2}, {"moe_intermediate_size", 32}, {"sliding_window", 8}, {"rms_norm_eps", 1e-6}});
  vision(d, {{"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
             {"num_key_value_heads", 2}, {"head_dim", 16}, {"patch_size", 16}, {"pooling_kernel_size", 3},
             {"position_embedding_size", 10240}, {"rms_norm_eps", 1e-6}, {"standardize", true}});
}

// The seed's model: gemma4_unified, encoder-free image and audio embedders.
void gemma4_12b(int, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 280);
  unified(d, 3840, 3840);
  d.layers = 48;
  d.text.update({{"vocab_size", 262144}, {"hidden_size", 3840}, {"intermediate_size", 15360},
                 {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 256},
                 {"global_head_dim", 512}, {"sliding_window", 1024}, {"rms_norm_eps", 1e-6}});
}

// Gemma-4-12B's attention (16 query heads, 8 KV heads, head_dim 256 / 512,
// window 1024, 5:1 sliding:full) on a small residual stream, MLP and
// vocabulary: a stack for measuring attention without 12B of weights.
void gemma4_12b_attention(int vocab, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 280);
  d.layers = 6;
  d.text.update({{"vocab_size", vocab}, {"hidden_size", 512}, {"intermediate_size", 1024}, {"num_attention_heads", 16},
                 {"num_key_value_heads", 8}, {"head_dim", 256}, {"global_head_dim", 512}, {"sliding_window", 1024},
                 {"rms_norm_eps", 1e-6}});
}

// Gemma-4-31B with the large-model vision encoder (use --layers to cut the
// 62 GB decoder).
void gemma4_31b(int, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 280);
  d.layers = 60;
  d.text.update({{"vocab_size", 262144}, {"hidden_size", 5376}, {"intermediate_size", 21504},
                 {"num_attention_heads", 32}, {"num_key_value_heads", 16}, {"num_global_key_value_heads", 4},
                 {"head_dim", 256}, {"global_head_dim", 512}, {"attention_k_eq_v", true}, {"sliding_window", 1024},
                 {"rms_norm_eps", 1e-6}});
  vision_large(d);
}

// gemma-4-e2b: 35 layers (4 sliding : 1 full), the last 20 reuse K/V,
// per-layer embeddings of 256.
void gemma4_e2b(int, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 280);
  causal(d);
  d.layers = 35;
  d.pattern = 5;
  d.text.update({{"vocab_size", 262144}, {"hidden_size", 1536}, {"intermediate_size", 6144}, {"num_attention_heads", 8},
                 {"num_key_value_heads", 1}, {"head_dim", 256}, {"global_head_dim", 512}, {"num_kv_shared_layers", 20},
                 {"use_double_wide_mlp", true}, {"hidden_size_per_layer_input", 256},
                 {"vocab_size_per_layer_input", 262144}, {"sliding_window", 512}, {"rms_norm_eps", 1e-6}});
  vision_on_device(d);
  conformer_audio(d, 1024, 12, 8, 32, 1536);
}

void gemma4_e4b(int, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 280);
  causal(d);
  d.layers = 42;
  d.text.update({{"vocab_size", 262144}, {"hidden_size", 2560}, {"intermediate_size", 10240}, {"num_attention_heads", 8},
                 {"num_key_value_heads", 2}, {"head_dim", 256}, {"global_head_dim", 512}, {"num_kv_shared_layers", 18},
                 {"hidden_size_per_layer_input", 256}, {"vocab_size_per_layer_input", 262144}, {"sliding_window", 512},
                 {"rms_norm_eps", 1e-6}});
  vision_on_device(d);
  conformer_audio(d, 1024, 12, 8, 32, 1536);
}

// 128 experts of 704, 8 per token, beside a dense MLP of 2112.
void gemma4_26b_a4b(int, const PresetTokenIds& s, PresetDraft& d) {
  multimodal(d, s, 280);
  d.layers = 30;
  d.text.update({{"vocab_size", 262144}, {"hidden_size", 2816}, {"intermediate_size", 2112}, {"num_attention_heads", 16},
                 {"num_key_value_heads", 8}, {"num_global_key_value_heads", 2}, {"head_dim", 256},
                 {"global_head_dim", 512}, {"attention_k_eq_v", true}, {"enable_moe_block", true}, {"num_experts", 128},
                 {"top_k_experts", 8}, {"moe_intermediate_size", 704}, {"sliding_window", 1024}, {"rms_norm_eps", 1e-6}});
  vision_large(d);
}

}  // namespace

std::vector<ModelPreset> gemma4_presets() {
  const Family g = Family::Gemma4;
  return {{"tiny-gemma4", g, true, false, tiny},
          {"tiny-gemma4-unified", g, true, false, tiny_unified},
          {"tiny-gemma4-ple", g, true, false, tiny_ple},
          {"tiny-gemma4-moe", g, true, false, tiny_moe},
          {"tiny-gemma4-256", g, true, false, tiny_256},
          {"gemma4-12b", g, false, true, gemma4_12b},
          {"gemma4-12b-attention", g, false, false, gemma4_12b_attention},
          {"gemma4-31b", g, false, true, gemma4_31b},
          {"gemma4-e2b", g, false, true, gemma4_e2b},
          {"gemma4-e4b", g, false, true, gemma4_e4b},
          {"gemma4-26b-a4b", g, false, true, gemma4_26b_a4b}};
}

}  // namespace splitdec
