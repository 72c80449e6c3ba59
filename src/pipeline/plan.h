// Execution plans and the attention path each chunk or step takes.
#pragma once

#include <string>

namespace splitdec {

enum class Plan {
  Single,     // dense bias + concat(past, new) for every chunk and step (today's static export)
  Split,      // masked path for media chunks, GQA for the rest, one shared in-place KV buffer
  SplitCopy,  // split, but prefill keeps its own present; copied into the decode buffer on handoff
  Unified,    // one mask-aware GQA kernel for every chunk and step
};

enum class AttentionPath { Masked, Gqa, DenseBias, Unified };

Plan parse_plan(const std::string& name);  // InputError listing the valid names
const char* plan_name(Plan p);
const char* path_name(AttentionPath p);

// The router: which path a chunk takes under a plan. `media` means the chunk
// holds a media block that is bidirectional on some layer under the policy;
// a decode step never does. split-copy's prefill stage is one graph that
// takes every prompt chunk.
AttentionPath route_chunk(Plan plan, bool media, bool decode);

}  // namespace splitdec
