#include "io/media_embeddings.h"

#include <cmath>

#include "core/error.h"
#include "core/npy.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace splitdec {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

MediaEmbeddings load_media_embeddings(const std::string& path, const ModelConfig& c) {
  const std::string want = "[n, hidden_size=" + std::to_string(c.hidden_size) + "]";
  std::vector<int64_t> shape;
  MediaEmbeddings m;
  try {
    if (ends_with(path, ".safetensors")) {
      const TensorStore store = TensorStore::open_file(path);
      const TensorView* t = store.find("embeddings");
      if (!t) {
        if (store.tensors().size() != 1)
          throw InputError(path + ": holds " + std::to_string(store.tensors().size()) +
                           " tensors; expected one, or one named 'embeddings'");
        t = &store.tensors().begin()->second;
      }
      shape = t->shape;
      m.data = t->to_f32();
    } else {
      NpyArray a = read_npy(path);
      shape = a.shape;
      m.data = std::move(a.data);
    }
  } catch (const FormatError& e) {
    throw InputError(std::string("media embeddings: ") + e.what());
  }
  if (shape.size() == 3 && shape[0] == 1) shape.erase(shape.begin());
  if (shape.size() != 2 || shape[1] != c.hidden_size)
    throw InputError(path + ": media embeddings have shape " + shape_text(shape) + ", expected " + want);
  if (shape[0] == 0) throw InputError(path + ": media embeddings have no rows");
  for (float x : m.data)
    if (!std::isfinite(x)) throw InputError(path + ": media embeddings hold a non-finite value");
  m.rows = shape[0];
  return m;
}

}  // namespace splitdec
