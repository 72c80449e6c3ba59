// Copyright (c) splitdec contributors. Licensed under the MIT License.
#include "../generators.h"
#include "gemma3_pipeline_model.h"

namespace Generators {

Gemma3PipelineModel::Gemma3PipelineModel(std::unique_ptr<Config> config, OrtEnv& ort_env)
    : DecoderOnlyPipelineModel(std::move(config), ort_env) {
  if (config_->model.vision.filename.empty())
    throw std::runtime_error("A gemma3 model with a decoder pipeline needs model.vision.filename");

  // As MultiModalLanguageModel does: the vision session takes the decoder's
  // session options unless it has its own, without graph capture.
  vision_session_options_ = OrtSessionOptions::Create();
  CreateSessionOptionsFromConfig(config_->model.vision.session_options.has_value()
                                     ? config_->model.vision.session_options.value()
                                     : config_->model.decoder.session_options,
                                 *vision_session_options_, true, /*disable_graph_capture=*/true);
  vision_session_ = CreateSession(ort_env, config_->model.vision.filename, vision_session_options_.get());
  // The processor reads pixel_values' type from here (GemmaImageProcessor).
  session_info_.Add(*vision_session_);
}

std::unique_ptr<State> Gemma3PipelineModel::CreateState(DeviceSpan<int32_t> sequence_lengths,
                                                        const GeneratorParams& params) const {
  return std::make_unique<Gemma3PipelineState>(*this, sequence_lengths, params);
}

Gemma3PipelineState::Gemma3PipelineState(const Gemma3PipelineModel& model, DeviceSpan<int32_t> sequence_lengths,
                                         const GeneratorParams& params)
    : DecoderOnlyPipelineState(model, sequence_lengths, params), gemma3_model_{model} {
  SetImageFeatures(nullptr);  // a text prompt (AppendTokens alone) binds no rows
}

void Gemma3PipelineState::SetImageFeatures(std::unique_ptr<OrtValue> features) {
  if (!features) {
    const std::array<int64_t, 2> no_rows{0, gemma3_model_.config_->model.decoder.hidden_size};
    features = OrtValue::CreateTensor(gemma3_model_.allocator_cpu_, no_rows, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
  }
  ortvalue_store_[gemma3_model_.config_->model.embedding.inputs.image_features] = std::move(features);
}

void Gemma3PipelineState::SetExtraInputs(const std::vector<ExtraInput>& extra_inputs) {
  // Inputs the pipeline's graphs list (none of the processor's, usually).
  DecoderOnlyPipelineState::SetExtraInputs(extra_inputs);

  const std::string& pixel_values_name = gemma3_model_.config_->model.vision.inputs.pixel_values;
  const auto pixel_values = std::find_if(extra_inputs.begin(), extra_inputs.end(),
                                         [&](const ExtraInput& input) { return input.name == pixel_values_name; });
  if (pixel_values == extra_inputs.end()) return;  // a prompt without images

  const char* input_name = pixel_values_name.c_str();
  const char* output_name = gemma3_model_.config_->model.vision.outputs.image_features.c_str();
  const OrtValue* input = pixel_values->tensor->GetOrtTensor();
  OrtValue* output = nullptr;  // allocated by ONNX Runtime: [images, tokens, hidden]
  gemma3_model_.vision_session_->Run(nullptr, &input_name, &input, 1, &output_name, &output, 1);
  SetImageFeatures(std::unique_ptr<OrtValue>(output));
}

DeviceSpan<float> Gemma3PipelineState::Run(int total_length, DeviceSpan<int32_t>& next_tokens,
                                           DeviceSpan<int32_t> next_indices) {
  const bool prompt_run = next_tokens.size() > 1;  // DecoderOnlyPipelineState's rule
  auto logits = DecoderOnlyPipelineState::Run(total_length, next_tokens, next_indices);
  if (prompt_run) SetImageFeatures(nullptr);  // the image rows belong to this prompt only
  return logits;
}

}  // namespace Generators
