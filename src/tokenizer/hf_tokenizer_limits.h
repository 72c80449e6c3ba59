// Bounds on what a tokenizer.json may ask of the reader. The file comes with
// a checkpoint, i.e. from whoever published it: without bounds a few hundred
// bytes of JSON (a chain of Replace normalizers each doubling the text) grow
// one encode to gigabytes. Each bound is far above what real tokenizers use
// (Gemma-3: one Replace normalizer growing text at most 3x, 262144 pieces,
// about 514000 merges, about 6400 added tokens, 3-step decoder), and each is
// reported as a FormatError naming the limit and the tokenizer.json field.
#pragma once

#include <cstddef>
#include <cstdint>

namespace splitdec::hf {

// The whole file: it is read into memory and parsed as one JSON value (Gemma-3's is 33 MiB).
inline constexpr size_t kMaxTokenizerJsonBytes = size_t{256} << 20;

// Steps of the normalizer and of the decoder, Sequence nodes included (this
// also bounds how deeply Sequences nest, which the reader recurses into).
inline constexpr size_t kMaxNormalizerSteps = 64;
inline constexpr size_t kMaxDecoderSteps = 64;

// The worst-case growth of text through the whole normalizer chain (and of a
// piece through the decoder's Replace steps): the product over Replace steps
// of max(1, content bytes / pattern bytes). Gemma's " " -> U+2581 is 3.
inline constexpr double kMaxTextGrowth = 16.0;

// Bytes of one String pattern or Replace content (Gemma's are 1 to 3 bytes).
inline constexpr size_t kMaxPatternBytes = 1024;

// Token ids lie in [0, kMaxVocabularySize): the reader allocates a table of
// max id + 1 entries, so an id is a size, not only a label.
inline constexpr int64_t kMaxVocabularySize = int64_t{1} << 22;  // 4194304
inline constexpr size_t kMaxMerges = size_t{1} << 23;            // 8388608
inline constexpr size_t kMaxAddedTokens = size_t{1} << 20;       // 1048576

// Strip decoder's start / stop counts (HF's are 0 or 1).
inline constexpr int64_t kMaxStripCount = 1024;

}  // namespace splitdec::hf
