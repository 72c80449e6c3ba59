// The float64 oracle of the three media frontends: the same signatures as
// siglip_encode, gemma4_vision_encode, unified_image_encode and
// unified_audio_encode, written as plain loops straight from the Hugging Face
// math (FRONTENDS.md sections 1.3, 2.3, 3.3) and sharing no code with the
// fast paths. Every activation, sum and softmax is a double; attention is an
// explicit softmax over all keys. The weights are read through
// WeightMatrix::row_f32 (exact), so a bf16 checkpoint is compared on the
// values it holds. Slow: for tests on small shapes only.
#pragma once

#include "io/media_embeddings.h"
#include "media/audio_file.h"
#include "media/conformer_audio_tower.h"
#include "media/gemma4_vision_tower.h"
#include "media/image_patches.h"
#include "media/siglip_tower.h"
#include "media/unified_embedder.h"

namespace splitdec {

MediaEmbeddings reference_siglip(const SiglipShape& shape, const SiglipWeights& weights, const ImagePatches& patches);

MediaEmbeddings reference_gemma4_vision(const Gemma4VisionShape& shape, const Gemma4VisionWeights& weights,
                                        const ImagePatches& patches);

MediaEmbeddings reference_unified_image(const UnifiedVisionShape& shape, const UnifiedVisionWeights& weights,
                                        const ImagePatches& patches);

MediaEmbeddings reference_unified_audio(const UnifiedAudioShape& shape, const WeightMatrix& projection, const AudioClip& clip);

// HF's log-mel features of the clip's valid frames, [frames, 128] (a plain
// DFT on the padded clip; audio_log_mel.h is the fast path).
MediaEmbeddings reference_log_mel(const std::vector<float>& samples);

// The conformer tower as HF runs it on the padded clip (masks, blocked
// attention with _rel_shift), the padded rows dropped at the end.
MediaEmbeddings reference_conformer_audio(const ConformerAudioShape& shape, const ConformerAudioWeights& weights,
                                          const AudioClip& clip);

}  // namespace splitdec
