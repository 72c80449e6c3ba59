// A Jinja template as HF chat templates use it: parsed once, rendered with
// a JSON object whose keys become the template's variables. The entry point
// of the interpreter; the rest of src/prompt/jinja/ is its inside.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "prompt/jinja/limits.h"

namespace splitdec::jinja {

struct Stmt;

class Template {
 public:
  // Throws TemplateError on a syntax error, an unknown filter or test, or
  // nesting past limits.max_depth.
  explicit Template(std::string_view source, Limits limits = {});
  ~Template();
  Template(const Template&);
  Template& operator=(const Template&);
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context` must be an object. ordered_json keeps its key order for
  // templates that iterate dicts; nlohmann::json iterates keys sorted.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const;

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;  // immutable once parsed, so copies share it
  Limits limits_;
};

}  // namespace splitdec::jinja
