// Copyright (c) splitdec contributors. Licensed under the MIT License.
//
// A Gemma-3 or Gemma-4 multimodal model whose decoder is a decoder pipeline:
// GenAI's Gemma processor (chosen by model.type) and a vision model in front
// of the stages of model.decoder.pipeline. With it, a package whose prompt
// stage attends with Gemma's mask (image tokens of one image see each other)
// and whose generation stage runs GroupQueryAttention over the same
// past/present buffers (search.past_present_share_buffer) runs through
// GenAI's multimodal API: OgaMultiModalProcessor, OgaImages,
// OgaGenerator_SetInputs.
//
// The vision model runs once, when SetInputs brings pixel_values (and, for
// Gemma-4, pixel_position_ids); its output becomes the pipeline value named
// by model.embedding.inputs.image_features, which the prompt-stage embedding
// lists as an input. After the prompt run that value is an empty
// [0, hidden] tensor again, so a later prompt run reads no stale rows.
#pragma once

#include "decoder_only_pipeline.h"

namespace Generators {

struct GemmaPipelineModel : DecoderOnlyPipelineModel {
  GemmaPipelineModel(std::unique_ptr<Config> config, OrtEnv& ort_env);

  std::unique_ptr<State> CreateState(DeviceSpan<int32_t> sequence_lengths,
                                     const GeneratorParams& params) const override;

  std::unique_ptr<OrtSessionOptions> vision_session_options_;
  std::unique_ptr<OrtSession> vision_session_;
  // The vision inputs the processor's outputs feed, by name:
  // pixel_values, and pixel_position_ids where the vision model takes it.
  std::vector<std::string> vision_input_names_;
};

struct GemmaPipelineState : DecoderOnlyPipelineState {
  GemmaPipelineState(const GemmaPipelineModel& model, DeviceSpan<int32_t> sequence_lengths,
                     const GeneratorParams& params);

  void SetExtraInputs(const std::vector<ExtraInput>& extra_inputs) override;

  DeviceSpan<float> Run(int total_length, DeviceSpan<int32_t>& next_tokens,
                        DeviceSpan<int32_t> next_indices) override;

 private:
  // Sets the image features the prompt-stage embedding reads: the vision
  // output, or no rows.
  void SetImageFeatures(std::unique_ptr<OrtValue> features);

  const GemmaPipelineModel& gemma_model_;
};

}  // namespace Generators
