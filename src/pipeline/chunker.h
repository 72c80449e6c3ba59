// Cuts a prompt segment into prefill chunks that never split a media block.
//
// Why a block must be whole in one chunk: a block's queries see each other
// in both directions, and each layer's K/V of the block comes out of the
// previous layer's attention over the whole block, so no query of the block
// can run before all of them do. A chunk therefore grows to hold a block
// longer than the chunk size; the sliding-layer rings grow with it (see
// kv/kv_cache.h), so no valid prompt is refused for the size of its images.
#pragma once

#include <vector>

namespace splitdec {

struct ChunkSpan {
  int begin = 0, end = 0;  // segment-local [begin, end)
  bool media = false;      // holds a media block (some sequence of the batch)
};

// block_ids: per sequence, one id per segment position (-1: none); every
// sequence has the same length. A chunk ends after `chunk_size` positions
// unless that would cut a block in some sequence: then it ends where that
// block starts, and the block opens the next chunk. A block longer than
// chunk_size grows the chunk it opens to the block's end.
std::vector<ChunkSpan> split_into_chunks(const std::vector<std::vector<int>>& block_ids, int chunk_size);

}  // namespace splitdec
