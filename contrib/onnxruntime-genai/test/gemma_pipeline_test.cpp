// Copyright (c) splitdec contributors. Licensed under the MIT License.
//
// GemmaPipelineModel: a gemma3 or gemma4 model whose decoder is a pipeline (a
// masked prompt stage, a GroupQueryAttention generation stage on shared
// buffers) runs through the multimodal API and gives the tokens of the same
// model exported as one decoder graph (stock MultiModalLanguageModel).
//
// Models (made by splitdec, see contrib/onnxruntime-genai/README.md):
//   test/models/gemma3-pipeline, gemma4-pipeline  export-onnx --plan split --genai-route multimodal
//   test/models/gemma3-single, gemma4-single      export-onnx --plan single --genai-route multimodal
// (MODEL_PATH is test/models/, test/CMakeLists.txt.)

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#define OGA_USE_SPAN 1
#include "ort_genai.h"

namespace {

struct Family {
  const char* name;          // the test models' prefix
  const char* image_prompt;  // with the family's image marker
};

const Family kFamilies[] = {{"gemma3", "<bos>Describe <start_of_image> in a word."},
                            {"gemma4", "<bos>Describe <|image> in a word."}};

std::string ModelDir(const std::string& name) { return std::string(MODEL_PATH) + name; }

bool HaveModels(const Family& f) {
  return std::filesystem::exists(ModelDir(std::string(f.name) + "-pipeline")) &&
         std::filesystem::exists(ModelDir(std::string(f.name) + "-single"));
}

// Greedy tokens after the processor's inputs for `prompt` and the image (or none).
std::vector<int32_t> Generate(const std::string& model_dir, const char* prompt, const char* image, int max_new) {
  auto model = OgaModel::Create(model_dir.c_str());
  auto processor = OgaMultiModalProcessor::Create(*model);
  std::unique_ptr<OgaImages> images;
  if (image) images = OgaImages::Load(std::vector<const char*>{image});
  auto inputs = processor->ProcessImages(prompt, images.get());
  auto params = OgaGeneratorParams::Create(*model);
  params->SetSearchOption("max_length", 1024);
  auto generator = OgaGenerator::Create(*model, *params);
  generator->SetInputs(*inputs);
  std::vector<int32_t> tokens;
  while (!generator->IsDone() && static_cast<int>(tokens.size()) < max_new) {
    generator->GenerateNextToken();
    tokens.push_back(generator->GetNextTokens()[0]);
  }
  return tokens;
}

}  // namespace

TEST(GemmaPipelineTest, ImagePromptGivesTheSingleGraphsTokens) {
  const std::string image = std::string(MODEL_PATH) + "../images/sheet.png";
  int ran = 0;  // families whose test models are there
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.name);
    if (!HaveModels(f)) continue;
    ++ran;
    const auto pipeline = Generate(ModelDir(std::string(f.name) + "-pipeline"), f.image_prompt, image.c_str(), 12);
    const auto single = Generate(ModelDir(std::string(f.name) + "-single"), f.image_prompt, image.c_str(), 12);
    ASSERT_FALSE(pipeline.empty());
    EXPECT_EQ(pipeline, single);
  }
  if (ran == 0) GTEST_SKIP() << "no gemma3-* / gemma4-* test models under " << MODEL_PATH;
}

TEST(GemmaPipelineTest, TextPromptNeedsNoImage) {
  const char* prompt = "<bos>Say something.";
  int ran = 0;  // families whose test models are there
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.name);
    if (!HaveModels(f)) continue;
    ++ran;
    const auto pipeline = Generate(ModelDir(std::string(f.name) + "-pipeline"), prompt, nullptr, 12);
    const auto single = Generate(ModelDir(std::string(f.name) + "-single"), prompt, nullptr, 12);
    ASSERT_FALSE(pipeline.empty());
    EXPECT_EQ(pipeline, single);
  }
  if (ran == 0) GTEST_SKIP() << "no gemma3-* / gemma4-* test models under " << MODEL_PATH;
}

TEST(GemmaPipelineTest, APipelineWithoutVisionIsRefusedByName) {
  int ran = 0;  // families whose test models are there
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.name);
    if (!HaveModels(f)) continue;
    ++ran;
    auto config = OgaConfig::Create(ModelDir(std::string(f.name) + "-pipeline").c_str());
    config->Overlay(R"({"model": {"vision": {"filename": ""}}})");
    try {
      OgaModel::Create(*config);
      FAIL() << "a " << f.name << " pipeline without model.vision.filename loaded";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("model.vision.filename"), std::string::npos) << e.what();
    }
  }
  if (ran == 0) GTEST_SKIP() << "no gemma3-* / gemma4-* test models under " << MODEL_PATH;
}
