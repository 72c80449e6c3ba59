// The mask contract (src/mask/mask_contract.h) computed inside an ONNX graph
// from the token ids, positions and the attention mask:
//
//   visible(i,j) = pad_ok(j) and (causal or block) and window    -- most rules
//   visible(i,j) = pad_ok(j) and (block or (causal and window))  -- legacy window
//
// Queries are the S new tokens (positions from position_ids); keys are the
// T slots of the sequence. Blocks come from the token ids as
// block_ids_from_modality derives them: each maximal run of vision (image or
// video) token ids is one block, numbered within the call. Keys before this
// call carry no block: a media block must lie whole inside one prefill call,
// which splitdec's chunker guarantees and a pipeline runtime gets by sending
// the prompt in one call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "mask/mask_contract.h"

namespace splitdec::onnx_export {

class GraphBuilder;

class MaskGraph {
 public:
  // batch, total, past_len: [1] int64 values of the graph; vision_token_ids:
  // the config's image and video token ids (negative ones are ignored).
  MaskGraph(GraphBuilder& g, MaskPolicy policy, const std::vector<int>& vision_token_ids, const std::string& batch,
            const std::string& total, const std::string& past_len);
  MaskPolicy policy() const { return policy_; }
  // [B, 1, S, T] bool, true where the key is visible (ONNX Attention's convention).
  std::string boolean(const LayerMaskRule& rule);
  // [B, 1, S, T] float: 0 where visible, the lowest float elsewhere (the single package's bias).
  std::string bias(const LayerMaskRule& rule);
  // [B, S] int64: the block of each new token (-1: none), from input_ids.
  const std::string& block_ids() const { return blk_; }

 private:
  GraphBuilder& g_;
  MaskPolicy policy_;
  std::string blk_, causal_, diff_, same_block_, pad_ok_;
  std::map<LayerMaskRule, std::string> booleans_, biases_;  // built once per rule
};

}  // namespace splitdec::onnx_export
