// The CPU backend: the model's layers on this machine's cores (kernels/,
// dispatched per CPU at run time), K/V in a host KvStore (kv/).
#pragma once

#include <memory>

#include "backend/decoder_backend.h"

namespace splitdec {

std::unique_ptr<DecoderBackend> make_cpu_backend(const Model& model, MaskPolicy policy, KvLayout (*layout)(AttentionPath),
                                                 std::unique_ptr<KvStore> store);

}  // namespace splitdec
