// The execution plans as one table: each row says, for one plan, which
// attention path a chunk or step takes, which KV layout each path reads,
// the KV store the session runs on and what that store pre-allocates.
// Session asks the row of its plan and nothing else; a new plan is a new
// row (docs/architecture.md, "The plan table").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kv/kv_store.h"
#include "splitdec/options.h"

namespace splitdec {

struct ModelConfig;

enum class Plan {
  Single,     // dense bias + concat(past, new) for every chunk and step (today's static export)
  Split,      // masked path for media chunks, GQA for the rest, one shared in-place KV buffer
  SplitCopy,  // split, but prefill keeps its own present; copied into the decode buffer on handoff
  Unified,    // one mask-aware GQA kernel for every chunk and step
};

// What a plan's store is sized by (SessionOptions' fields).
struct KvStoreShape {
  int sequences = 1;
  int64_t capacity = 0;
  int max_chunk = 0;
  DType dtype = DType::F32;
};

struct PlanSpec {
  Plan plan;
  const char* name;  // as --plan takes it
  // The router: the path a chunk takes. `media`: the chunk holds a media
  // block that is bidirectional on some layer under the policy; a decode
  // step never does.
  AttentionPath (*route)(bool media, bool decode);
  // The KV layout a path reads under this plan.
  KvLayout (*layout)(AttentionPath path);
  std::unique_ptr<KvStore> (*make_store)(const ModelConfig& config, const KvStoreShape& shape);
  // What make_store allocates up front (nothing for a store that grows per call).
  KvMemory (*reserved)(const ModelConfig& config, const KvStoreShape& shape);
};

// Every plan, in --plan's order.
const std::vector<PlanSpec>& plan_table();
const PlanSpec& plan_spec(Plan plan);

const char* plan_name(Plan p);
// The session plan of a public ExecutionPlan (InputError for Reference, which no session runs).
Plan session_plan(ExecutionPlan plan);
const char* path_name(AttentionPath p);

}  // namespace splitdec
