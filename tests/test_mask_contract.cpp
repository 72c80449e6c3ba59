// The mask contract against a brute-force enumeration written straight from
// the policy table in DESIGN.md section 3, on random modality sequences.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "mask/mask_contract.h"

using namespace splitdec;

namespace {

// The table, row by row, as independent code: the rule for one pair.
bool table_visible(MaskPolicy p, bool sliding, int W, int i, int j, int bi, int bj, bool pad) {
  if (pad) return false;
  const bool causal = j <= i;
  const bool block = bi >= 0 && bi == bj;
  const bool window = j > i - W;
  switch (p) {
    case MaskPolicy::Gemma3:
    case MaskPolicy::AllLayers:
      return sliding ? ((causal || block) && window) : (causal || block);
    case MaskPolicy::Gemma4:
      return sliding ? ((causal || block) && window) : causal;
    case MaskPolicy::LegacyWindow:
      return sliding ? (block || (causal && window)) : (causal || block);
    case MaskPolicy::Gemma4LegacyWindow:
      return sliding ? (block || (causal && window)) : causal;
    case MaskPolicy::Causal:
      return sliding ? (causal && window) : causal;
  }
  return false;
}

// Enumerates block ids the slow way: scan left to right, a new id whenever a
// vision token (image or video, counted together as HF's `is_vision`) does
// not follow another vision token.
std::vector<int> brute_blocks(const std::vector<Modality>& m) {
  std::vector<int> ids;
  int next = 0;
  for (size_t k = 0; k < m.size(); ++k) {
    const bool vision = m[k] == Modality::Image || m[k] == Modality::Video;
    if (!vision) {
      ids.push_back(-1);
      continue;
    }
    if (k > 0 && ids.back() >= 0) ids.push_back(ids.back());
    else ids.push_back(next++);
  }
  return ids;
}

struct Case {
  std::vector<Modality> modality;
  std::vector<bool> pad;
};

Case random_case(std::mt19937& rng, int len) {
  Case c;
  // Left padding, then segments of text / image / video / audio of random
  // lengths (blocks can be adjacent, at the start or at the end).
  const int pads = int(rng() % 3 == 0 ? rng() % 4 : 0);
  for (int k = 0; k < pads && int(c.modality.size()) < len; ++k) {
    c.modality.push_back(Modality::Text);
    c.pad.push_back(true);
  }
  while (int(c.modality.size()) < len) {
    const Modality m = Modality(rng() % 4);
    const int run = 1 + int(rng() % (m == Modality::Text ? 4 : 14));
    for (int k = 0; k < run && int(c.modality.size()) < len; ++k) {
      c.modality.push_back(m);
      c.pad.push_back(false);
    }
  }
  return c;
}

void check_case(const Case& c, int W) {
  const std::vector<int> blk = block_ids_from_modality(c.modality);
  ASSERT_EQ(blk, brute_blocks(c.modality));
  const std::vector<KeyInterval> spans = block_spans(blk);
  const int n = int(c.modality.size());
  for (MaskPolicy p : all_mask_policies()) {
    for (LayerType t : {LayerType::Sliding, LayerType::Full}) {
      const bool sliding = t == LayerType::Sliding;
      const LayerMaskRule rule = layer_mask_rule(p, t, W);
      for (int i = 0; i < n; ++i) {
        const int bi = blk[size_t(i)];
        const KeyInterval iv =
            visible_keys(rule, i, bi, bi >= 0 ? spans[size_t(bi)].begin : 0, bi >= 0 ? spans[size_t(bi)].end : 0);
        for (int j = 0; j < n; ++j) {
          const bool want = table_visible(p, sliding, sliding ? W : 1 << 30, i, j, bi, blk[size_t(j)], c.pad[size_t(j)]);
          ASSERT_EQ(visible(rule, i, j, bi, blk[size_t(j)], c.pad[size_t(j)]), want)
              << mask_policy_name(p) << (sliding ? " sliding" : " full") << " i=" << i << " j=" << j;
          // The interval description agrees with the pairwise rule (padding
          // is applied per key on top of it).
          const bool in_interval = j >= iv.begin && j < iv.end;
          ASSERT_EQ(in_interval && !c.pad[size_t(j)], want)
              << "interval [" << iv.begin << "," << iv.end << ") " << mask_policy_name(p) << " i=" << i << " j=" << j;
        }
      }
    }
  }
}

Case from_string(const std::string& s) {
  // t = text, i = image, v = video, a = audio, p = pad
  Case c;
  for (char ch : s) {
    c.modality.push_back(ch == 'i' ? Modality::Image : ch == 'v' ? Modality::Video : ch == 'a' ? Modality::Audio : Modality::Text);
    c.pad.push_back(ch == 'p');
  }
  return c;
}

}  // namespace

TEST(MaskContract, NamedEdgeCases) {
  for (int W : {1, 3, 4, 8}) {
    check_case(from_string("iiiittt"), W);                 // block at the start
    check_case(from_string("tttiiii"), W);                 // block at the end
    check_case(from_string("tiiivvvviit"), W);             // image, video, image runs: one vision block
    check_case(from_string("tiitvvtiiaavv"), W);           // separated by text or audio: separate blocks
    check_case(from_string("ttiiiiiiiiiiiit"), W);         // block longer than the window
    check_case(from_string("pppttiiiitaaat"), W);          // padding and audio
    check_case(from_string("i"), W);
    check_case(from_string("p"), W);
  }
}

TEST(MaskContract, RandomSequencesAgainstTable) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) check_case(random_case(rng, 1 + int(rng() % 40)), 1 + int(rng() % 10));
}

TEST(MaskContract, DecodeQueryIsPlainCausalUnderEveryPolicy) {
  // A text query after an image: every policy gives causal (+ window).
  const Case c = from_string("ttiiiiiit");
  const std::vector<int> blk = block_ids_from_modality(c.modality);
  const int i = 8;
  for (MaskPolicy p : all_mask_policies())
    for (LayerType t : {LayerType::Sliding, LayerType::Full}) {
      const LayerMaskRule rule = layer_mask_rule(p, t, 4);
      for (int j = 0; j < 9; ++j)
        EXPECT_EQ(visible(rule, i, j, blk[i], blk[size_t(j)], false), j <= i && (rule.window == 0 || j > i - 4));
    }
}

TEST(MaskContract, PolicyNamesAndBidirectionality) {
  for (MaskPolicy p : all_mask_policies()) EXPECT_EQ(parse_mask_policy(mask_policy_name(p)), p);
  EXPECT_THROW(parse_mask_policy("bidirectional"), InputError);
  EXPECT_FALSE(policy_has_bidirectional_layer(MaskPolicy::Causal));
  EXPECT_TRUE(policy_has_bidirectional_layer(MaskPolicy::Gemma4));
  EXPECT_TRUE(layer_mask_rule(MaskPolicy::Gemma4, LayerType::Sliding, 4).block);
  EXPECT_FALSE(layer_mask_rule(MaskPolicy::Gemma4, LayerType::Full, 4).block);
}

TEST(MaskContract, ExplicitBlockIdsMustBeContiguous) {
  EXPECT_NO_THROW(validate_block_ids({-1, 0, 0, -1, 1, 1, 2}));
  EXPECT_NO_THROW(validate_block_ids({3, 3, -1, 0}));
  EXPECT_THROW(validate_block_ids({0, 0, -1, 0}), InputError);
  EXPECT_THROW(validate_block_ids({-2}), InputError);
}

// Hugging Face's Gemma-4 mask takes `is_vision = image | video`: adjacent
// image and video runs are one block; text or audio between them separates.
TEST(MaskContract, AdjacentImageAndVideoRunsAreOneBlock) {
  EXPECT_EQ(block_ids_from_modality(from_string("tiivvvt").modality), (std::vector<int>{-1, 0, 0, 0, 0, 0, -1}));
  EXPECT_EQ(block_ids_from_modality(from_string("vviit").modality), (std::vector<int>{0, 0, 0, 0, -1}));
  EXPECT_EQ(block_ids_from_modality(from_string("iitvv").modality), (std::vector<int>{0, 0, -1, 1, 1}));
  EXPECT_EQ(block_ids_from_modality(from_string("iiavv").modality), (std::vector<int>{0, 0, -1, 1, 1}));
  // An image token sees the video token after it on a bidirectional layer.
  const std::vector<int> blk = block_ids_from_modality(from_string("tiivvt").modality);
  const LayerMaskRule rule = layer_mask_rule(MaskPolicy::Gemma4, LayerType::Sliding, 512);
  EXPECT_TRUE(visible(rule, 1, 4, blk[1], blk[4], false));
  EXPECT_FALSE(visible(rule, 1, 5, blk[1], blk[5], false));
  EXPECT_FALSE(is_vision(Modality::Audio));
  EXPECT_FALSE(is_vision(Modality::Text));
}
