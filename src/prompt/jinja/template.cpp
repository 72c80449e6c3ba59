#include "prompt/jinja/template.h"

#include "prompt/jinja/ast.h"
#include "prompt/jinja/lexer.h"
#include "prompt/jinja/parser.h"
#include "prompt/jinja/renderer.h"
#include "prompt/jinja/template_error.h"

namespace splitdec::jinja {

struct Template::Parsed {
  Body body;
};

Template::Template(std::string_view source, Limits limits) : limits_(limits) {
  auto parsed = std::make_shared<Parsed>();
  parsed->body = parse(tokenize(source), limits.max_depth);
  parsed_ = std::move(parsed);
}

Template::~Template() = default;
Template::Template(const Template&) = default;
Template& Template::operator=(const Template&) = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

namespace {

template <class Json>
Dict context_of(const Json& context) {
  if (!context.is_object()) throw TemplateError("chat template: the render context must be a JSON object");
  return Value::from_json(context).as_dict();
}

}  // namespace

std::string Template::render(const nlohmann::ordered_json& context) const {
  return jinja::render(parsed_->body, context_of(context), limits_);
}

std::string Template::render(const nlohmann::json& context) const {
  return jinja::render(parsed_->body, context_of(context), limits_);
}

}  // namespace splitdec::jinja
