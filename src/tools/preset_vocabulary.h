// The vocabularies of make-model's full-size presets: the real Gemma-3 /
// Gemma-4 tokenizers' size (262144 pieces) and special-token layout (ids and
// strings of <bos>, <eos>, the turn markers, the media markers and soft
// tokens), filled with the pieces of make-model's small trained tokenizer and
// then synthetic merges. The weights are random, so the pieces need not be
// Google's; the layout and the file format are what the code paths see.
#pragma once

#include "tokenizer/gemma_tokenizer_json.h"

namespace splitdec {

enum class PresetFamily { Gemma3, Gemma4 };

// Special ids of a family's real tokenizer (-1: the family has none).
struct FamilySpecialIds {
  int pad = 0, eos = 1, bos = 2, unk = 3;
  int start_of_turn = 105, end_of_turn = 106;
  int boi = 255999, eoi = 256000, image = 262144;
  int boa = -1, eoa = -1, audio = -1, video = -1;
};
FamilySpecialIds family_special_ids(PresetFamily family);

// `trained`: a vocabulary from bpe_vocabulary_from_sentencepiece; its normal
// pieces and merges come first.
BpeVocabulary preset_vocabulary(PresetFamily family, const BpeVocabulary& trained, int size = 262144);

}  // namespace splitdec
