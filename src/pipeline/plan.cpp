#include "pipeline/plan.h"

#include "core/error.h"

namespace splitdec {

Plan parse_plan(const std::string& name) {
  if (name == "single") return Plan::Single;
  if (name == "split") return Plan::Split;
  if (name == "split-copy") return Plan::SplitCopy;
  if (name == "unified") return Plan::Unified;
  throw InputError("unknown plan '" + name + "' (valid: single, split, split-copy, unified)");
}

const char* plan_name(Plan p) {
  switch (p) {
    case Plan::Single: return "single";
    case Plan::Split: return "split";
    case Plan::SplitCopy: return "split-copy";
    case Plan::Unified: return "unified";
  }
  return "?";
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

AttentionPath route_chunk(Plan plan, bool media, bool decode) {
  switch (plan) {
    case Plan::Single: return AttentionPath::DenseBias;
    case Plan::Unified: return AttentionPath::Unified;
    case Plan::Split: return media && !decode ? AttentionPath::Masked : AttentionPath::Gqa;
    case Plan::SplitCopy: return decode ? AttentionPath::Gqa : AttentionPath::Masked;
  }
  return AttentionPath::Gqa;
}

}  // namespace splitdec
