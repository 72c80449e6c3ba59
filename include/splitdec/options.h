// The runtime's public choices as enums: how a session runs (the plan and
// the mask policy), how it stores K/V, how an engine stores the weights.
// Strings appear only at the edges (command-line flags, server fields):
// each enum has its parser, which throws InputError listing the valid names.
#pragma once

#include <string>

namespace splitdec {

// The execution plans (docs/architecture.md, "The plan table").
enum class ExecutionPlan {
  Single,     // dense bias + concat(past, new) every chunk and step: a static exported graph
  Split,      // media chunks masked, everything else GQA, one in-place KV buffer (the default)
  SplitCopy,  // split, with prefill's own present copied into the decode buffer on hand-off
  Unified,    // one mask-aware GQA kernel for every chunk and step
  Reference,  // Batch only: every sequence recomputed from scratch at each step (the oracle)
};
ExecutionPlan parse_execution_plan(const std::string& name);  // single | split | split-copy | unified | reference
const char* execution_plan_name(ExecutionPlan plan);

// Which layers let a media block attend both ways (docs/semantics.md).
enum class MaskPolicy { Gemma3, Gemma4, AllLayers, LegacyWindow, Gemma4LegacyWindow, Causal };
MaskPolicy parse_mask_policy(const std::string& name);  // gemma3 | gemma4 | all-layers | legacy-window | ...
const char* mask_policy_name(MaskPolicy policy);

// Storage of the shared KV buffer.
enum class KvStorage {
  F32,
  BF16,
  F16,
  Q8,  // int8 rows, one f32 scale each
};
KvStorage parse_kv_storage(const std::string& name);  // f32 | bf16 | f16 | q8
const char* kv_storage_name(KvStorage storage);

// How an engine stores the decoder's weights (docs/quantization.md).
enum class WeightStorage {
  Checkpoint,  // as the folder stores them (f32, bf16, f16, or the blocks `splitdec quantize` wrote)
  Q8,          // linear layers and embedding / LM head as Q8_0 blocks; int8 activations in decode
  Q4,          // linear layers as Q4_0, embedding / LM head as Q8_0; int8 activations in decode
  Q8F32Act,    // Q8, f32 activations
  Q4F32Act,    // Q4, f32 activations
};
WeightStorage parse_weight_storage(const std::string& name);  // checkpoint (or "") | q8 | q4 | q8-f32act | q4-f32act
const char* weight_storage_name(WeightStorage storage);

}  // namespace splitdec
