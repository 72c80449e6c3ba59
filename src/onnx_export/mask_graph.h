// The mask contract (src/mask/mask_contract.h) computed inside an ONNX graph
// from per-token block ids, positions and the attention mask:
//
//   visible(i,j) = pad_ok(j) and (causal or block) and window    -- most rules
//   visible(i,j) = pad_ok(j) and (block or (causal and window))  -- legacy window
//
// Queries are the S new tokens (positions from position_ids); keys are the
// T slots of the sequence. Keys before this call carry no block: a media
// block must lie whole inside one prefill call, which splitdec's chunker
// guarantees and a pipeline runtime gets by sending the prompt in one call.
#pragma once

#include <map>
#include <string>

#include "mask/mask_contract.h"

namespace splitdec::onnx_export {

class GraphBuilder;

class MaskGraph {
 public:
  // batch, total, past_len: [1] int64 values of the graph.
  MaskGraph(GraphBuilder& g, MaskPolicy policy, const std::string& batch, const std::string& total,
            const std::string& past_len);
  MaskPolicy policy() const { return policy_; }
  // [B, 1, S, T] bool, true where the key is visible (ONNX Attention's convention).
  std::string boolean(const LayerMaskRule& rule);
  // [B, 1, S, T] float: 0 where visible, the lowest float elsewhere (the single package's bias).
  std::string bias(const LayerMaskRule& rule);

 private:
  GraphBuilder& g_;
  MaskPolicy policy_;
  std::string causal_, diff_, same_block_, pad_ok_;
  std::map<LayerMaskRule, std::string> booleans_, biases_;  // built once per rule
};

}  // namespace splitdec::onnx_export
