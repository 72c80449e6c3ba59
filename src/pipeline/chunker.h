// Cuts a prompt segment into prefill chunks that never split a media block.
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
