#include "onnx_export/mask_graph.h"

#include <limits>

#include "onnx_export/decoder_graphs.h"
#include "onnx_export/onnx_graph.h"

namespace splitdec::onnx_export {

namespace {

// block_ids_from_modality over the token ids: a block starts at each vision
// token whose left neighbour (in this call) is not one; the k-th start opens
// block k. [B, S] int64, -1 outside blocks.
std::string block_ids_from_tokens(GraphBuilder& g, const std::vector<int>& vision_token_ids) {
  std::string is_vision;
  for (int id : vision_token_ids) {
    if (id < 0) continue;
    const std::string eq = g.op("Equal", {names::kInputIds, g.const_i64(id)});
    is_vision = is_vision.empty() ? eq : g.op("Or", {is_vision, eq});
  }
  if (is_vision.empty())  // a text-only model: no blocks
    return g.op("Sub", {g.op("Mul", {names::kInputIds, g.const_i64(0)}), g.const_i64(1)});
  const std::string axis = g.const_i64(1);
  const std::string batch = g.op("Shape", {names::kInputIds}, {{"end", int64_t(1)}});
  const std::string column = g.op("Concat", {batch, g.const_i64(1)}, {{"axis", int64_t(0)}});  // [B, 1]
  const std::string none = g.op("Cast", {g.op("Expand", {g.const_i64(0), column})}, {{"to", int64_t(onnx::TensorProto::BOOL)}});
  const std::string left = g.op("Concat", {none, g.op("Slice", {is_vision, g.const_i64(0), g.const_i64(-1), axis})},
                                {{"axis", int64_t(1)}});  // is_vision shifted right by one
  const std::string starts = g.op("And", {is_vision, g.op("Not", {left})});
  const std::string count = g.op("CumSum", {g.op("Cast", {starts}, {{"to", int64_t(onnx::TensorProto::INT64)}}), g.scalar_i64(1)});
  return g.op("Where", {is_vision, g.op("Sub", {count, g.const_i64(1)}), g.const_i64(-1)});
}

}  // namespace

MaskGraph::MaskGraph(GraphBuilder& g, MaskPolicy policy, const std::vector<int>& vision_token_ids,
                     const std::string& batch, const std::string& total, const std::string& past_len)
    : g_(g), policy_(policy) {
  g_.set_scope("mask");
  blk_ = block_ids_from_tokens(g_, vision_token_ids);
  const std::string q_pos = g_.op("Unsqueeze", {names::kPositionIds, g_.const_i64(-1)});  // [B,S,1]
  const std::string k_pos =
      g_.op("Range", {g_.scalar_i64(0), g_.op("Squeeze", {total}), g_.scalar_i64(1)});  // [T]
  causal_ = g_.op("LessOrEqual", {k_pos, q_pos});                                     // [B,S,T]
  diff_ = g_.op("Sub", {q_pos, k_pos});                                               // i - j
  // Key block ids: -1 for the keys of earlier calls, then this call's ids.
  const std::string past_blocks =
      g_.op("Expand", {g_.const_i64(-1), g_.op("Concat", {batch, past_len}, {{"axis", int64_t(0)}})});
  const std::string k_blk = g_.op("Concat", {past_blocks, blk_}, {{"axis", int64_t(1)}});  // [B,T]
  const std::string q_blk = g_.op("Unsqueeze", {blk_, g_.const_i64(-1)});                // [B,S,1]
  same_block_ = g_.op("And", {g_.op("Equal", {q_blk, g_.op("Unsqueeze", {k_blk, g_.const_i64(1)})}),
                              g_.op("GreaterOrEqual", {q_blk, g_.const_i64(0)})});
  pad_ok_ = g_.op("Cast", {g_.op("Unsqueeze", {names::kAttentionMask, g_.const_i64(1)})},
                  {{"to", int64_t(onnx::TensorProto::BOOL)}});  // [B,1,T]
  g_.set_scope("");
}

std::string MaskGraph::boolean(const LayerMaskRule& rule) {
  if (auto it = booleans_.find(rule); it != booleans_.end()) return it->second;
  g_.set_scope("mask");
  std::string window;  // j > i - W
  if (rule.window > 0) window = g_.op("Less", {diff_, g_.const_i64(rule.window)});
  auto both = [&](const std::string& a, const std::string& b) { return b.empty() ? a : g_.op("And", {a, b}); };
  std::string visible;
  if (!rule.block) visible = both(causal_, window);
  else if (rule.window_limits_block) visible = both(g_.op("Or", {causal_, same_block_}), window);
  else visible = g_.op("Or", {same_block_, both(causal_, window)});
  visible = g_.op("Unsqueeze", {g_.op("And", {visible, pad_ok_}), g_.const_i64(1)});  // [B,1,S,T]
  g_.set_scope("");
  return booleans_[rule] = visible;
}

std::string MaskGraph::bias(const LayerMaskRule& rule) {
  if (auto it = biases_.find(rule); it != biases_.end()) return it->second;
  const std::string visible = boolean(rule);
  g_.set_scope("mask");
  const std::string b = g_.op("Where", {visible, g_.scalar_f32(0.f), g_.scalar_f32(std::numeric_limits<float>::lowest())});
  g_.set_scope("");
  return biases_[rule] = b;
}

}  // namespace splitdec::onnx_export
