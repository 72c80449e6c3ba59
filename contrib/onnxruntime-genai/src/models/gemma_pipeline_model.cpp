// Copyright (c) splitdec contributors. Licensed under the MIT License.
#include "../generators.h"
#include "gemma_pipeline_model.h"

namespace Generators {

GemmaPipelineModel::GemmaPipelineModel(std::unique_ptr<Config> config, OrtEnv& ort_env)
    : DecoderOnlyPipelineModel(std::move(config), ort_env) {
  if (config_->model.vision.filename.empty())
    throw std::runtime_error("A " + config_->model.type +
                             " model with a decoder pipeline needs model.vision.filename");

  // As MultiModalLanguageModel does: the vision session takes the decoder's
  // session options unless it has its own, without graph capture.
  vision_session_options_ = OrtSessionOptions::Create();
  CreateSessionOptionsFromConfig(config_->model.vision.session_options.has_value()
                                     ? config_->model.vision.session_options.value()
                                     : config_->model.decoder.session_options,
                                 *vision_session_options_, true, /*disable_graph_capture=*/true);
  vision_session_ = CreateSession(ort_env, config_->model.vision.filename, vision_session_options_.get());
  // The processors read the input types from here (GemmaImageProcessor:
  // pixel_values; Gemma4MultiModalProcessor: pixel_position_ids too).
  session_info_.Add(*vision_session_);

  vision_input_names_.push_back(config_->model.vision.inputs.pixel_values);
  SessionInfo vision_only;
  vision_only.Add(*vision_session_);
  if (vision_only.HasInput(config_->model.vision.inputs.pixel_position_ids))
    vision_input_names_.push_back(config_->model.vision.inputs.pixel_position_ids);
}

std::unique_ptr<State> GemmaPipelineModel::CreateState(DeviceSpan<int32_t> sequence_lengths,
                                                       const GeneratorParams& params) const {
  return std::make_unique<GemmaPipelineState>(*this, sequence_lengths, params);
}

GemmaPipelineState::GemmaPipelineState(const GemmaPipelineModel& model, DeviceSpan<int32_t> sequence_lengths,
                                       const GeneratorParams& params)
    : DecoderOnlyPipelineState(model, sequence_lengths, params), gemma_model_{model} {
  SetImageFeatures(nullptr);  // a text prompt (AppendTokens alone) binds no rows
}

void GemmaPipelineState::SetImageFeatures(std::unique_ptr<OrtValue> features) {
  if (!features) {
    const std::array<int64_t, 2> no_rows{0, gemma_model_.config_->model.decoder.hidden_size};
    features = OrtValue::CreateTensor(gemma_model_.allocator_cpu_, no_rows, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
  }
  ortvalue_store_[gemma_model_.config_->model.embedding.inputs.image_features] = std::move(features);
}

void GemmaPipelineState::SetExtraInputs(const std::vector<ExtraInput>& extra_inputs) {
  // Inputs the pipeline's graphs list (none of the processor's, usually).
  DecoderOnlyPipelineState::SetExtraInputs(extra_inputs);

  std::vector<const char*> input_names;
  std::vector<const OrtValue*> inputs;
  for (const std::string& name : gemma_model_.vision_input_names_) {
    const auto found = std::find_if(extra_inputs.begin(), extra_inputs.end(),
                                    [&](const ExtraInput& input) { return input.name == name; });
    if (found == extra_inputs.end()) {
      if (inputs.empty()) return;  // a prompt without images
      throw std::runtime_error("The processor gave pixel values without " + name + ", which the vision model takes");
    }
    input_names.push_back(name.c_str());
    inputs.push_back(found->tensor->GetOrtTensor());
  }
  const char* output_name = gemma_model_.config_->model.vision.outputs.image_features.c_str();
  OrtValue* output = nullptr;  // allocated by ONNX Runtime: [images, tokens, hidden]
  gemma_model_.vision_session_->Run(nullptr, input_names.data(), inputs.data(), inputs.size(), &output_name, &output, 1);
  SetImageFeatures(std::unique_ptr<OrtValue>(output));
}

DeviceSpan<float> GemmaPipelineState::Run(int total_length, DeviceSpan<int32_t>& next_tokens,
                                          DeviceSpan<int32_t> next_indices) {
  const bool prompt_run = next_tokens.size() > 1;  // DecoderOnlyPipelineState's rule
  auto logits = DecoderOnlyPipelineState::Run(total_length, next_tokens, next_indices);
  if (prompt_run) SetImageFeatures(nullptr);  // the image rows belong to this prompt only
  return logits;
}

}  // namespace Generators
