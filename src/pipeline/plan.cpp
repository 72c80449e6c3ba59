#include "pipeline/plan.h"

#include "core/error.h"
#include "core/named_values.h"
#include "io/model_config.h"
#include "kv/concat_kv.h"
#include "kv/kv_cache.h"
#include "kv/split_copy_kv.h"

namespace splitdec {

namespace {

std::unique_ptr<KvStore> shared_buffer(const ModelConfig& c, const KvStoreShape& s) {
  return std::make_unique<KvCache>(c, s.sequences, s.capacity, s.max_chunk, s.dtype);
}
KvMemory shared_buffer_bytes(const ModelConfig& c, const KvStoreShape& s) {
  return KvCache::plan(c, s.sequences, s.capacity, s.max_chunk, s.dtype);
}
KvLayout always_shared(AttentionPath) { return KvLayout::Shared; }

}  // namespace

const std::vector<PlanSpec>& plan_table() {
  static const std::vector<PlanSpec> table = {
      {Plan::Single, "single",
       // A static export's one graph: a dense bias over concat(past, new), every call.
       [](bool, bool) { return AttentionPath::DenseBias; },
       [](AttentionPath) { return KvLayout::Present; },
       [](const ModelConfig& c, const KvStoreShape& s) -> std::unique_ptr<KvStore> {
         return std::make_unique<ConcatKv>(c, s.sequences, s.dtype);
       },
       [](const ModelConfig&, const KvStoreShape&) { return KvMemory{}; }},
      {Plan::Split, "split",
       // Media chunks through the masked kernel, everything else GQA, one in-place buffer.
       [](bool media, bool decode) { return media && !decode ? AttentionPath::Masked : AttentionPath::Gqa; },
       always_shared, shared_buffer, shared_buffer_bytes},
      {Plan::SplitCopy, "split-copy",
       // A prefill graph with its own present (every prompt chunk), a decode graph on the buffer.
       [](bool, bool decode) { return decode ? AttentionPath::Gqa : AttentionPath::Masked; },
       [](AttentionPath path) { return path == AttentionPath::Masked ? KvLayout::Present : KvLayout::Shared; },
       [](const ModelConfig& c, const KvStoreShape& s) -> std::unique_ptr<KvStore> {
         return std::make_unique<SplitCopyKv>(c, s.sequences, s.capacity, s.max_chunk, s.dtype);
       },
       shared_buffer_bytes},
      {Plan::Unified, "unified",
       // One mask-aware GQA kernel for every chunk and step.
       [](bool, bool) { return AttentionPath::Unified; }, always_shared, shared_buffer, shared_buffer_bytes},
  };
  return table;
}

const PlanSpec& plan_spec(Plan plan) {
  for (const PlanSpec& s : plan_table())
    if (s.plan == plan) return s;
  throw InputError("no such plan");
}

const char* plan_name(Plan p) { return plan_spec(p).name; }

namespace {
constexpr NamedValue<ExecutionPlan> kExecutionPlans[] = {{ExecutionPlan::Single, "single"},
                                                         {ExecutionPlan::Split, "split"},
                                                         {ExecutionPlan::SplitCopy, "split-copy"},
                                                         {ExecutionPlan::Unified, "unified"},
                                                         {ExecutionPlan::Reference, "reference"}};
}  // namespace

ExecutionPlan parse_execution_plan(const std::string& name) { return parse_named(kExecutionPlans, name, "plan"); }

const char* execution_plan_name(ExecutionPlan plan) { return name_of(kExecutionPlans, plan); }

Plan session_plan(ExecutionPlan plan) {
  switch (plan) {
    case ExecutionPlan::Single: return Plan::Single;
    case ExecutionPlan::Split: return Plan::Split;
    case ExecutionPlan::SplitCopy: return Plan::SplitCopy;
    case ExecutionPlan::Unified: return Plan::Unified;
    case ExecutionPlan::Reference: break;
  }
  throw InputError("plan reference runs only in a Batch (it recomputes every sequence; a session keeps KV)");
}

const char* path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::Masked: return "masked";
    case AttentionPath::Gqa: return "gqa";
    case AttentionPath::DenseBias: return "dense-bias";
    case AttentionPath::Unified: return "unified";
  }
  return "?";
}

}  // namespace splitdec
