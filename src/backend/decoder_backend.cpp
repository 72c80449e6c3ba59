#include "backend/decoder_backend.h"

#include <cstdlib>

#include "backend/cpu_backend.h"
#include "core/error.h"
#include "core/named_values.h"

namespace splitdec {

namespace {
// A new backend is a new row here and a case in make_decoder_backend.
constexpr NamedValue<BackendKind> kBackends[] = {{BackendKind::Cpu, "cpu"}};
}  // namespace

std::unique_ptr<DecoderBackend> make_decoder_backend(BackendKind kind, const Model& model, MaskPolicy policy,
                                                     KvLayout (*layout)(AttentionPath), std::unique_ptr<KvStore> store) {
  switch (kind) {
    case BackendKind::Cpu:
      return make_cpu_backend(model, policy, layout, std::move(store));
  }
  throw InputError("no such backend");
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const NamedValue<BackendKind>& e : kBackends) names.push_back(e.name);
  return names;
}

BackendKind parse_backend(const std::string& name) { return parse_named(kBackends, name, "backend"); }

BackendKind default_backend() {
  const char* env = std::getenv("SPLITDEC_BACKEND");
  if (!env || !*env) return BackendKind::Cpu;
  try {
    return parse_backend(env);
  } catch (const InputError& e) {
    throw InputError(std::string("SPLITDEC_BACKEND: ") + e.what());
  }
}

}  // namespace splitdec
