#include "prompt/jinja/template.h"

#include "prompt/jinja/ast.h"
#include "prompt/jinja/eval_failure.h"
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
  const RenderBudget literals(limits);  // string literals are held to this template's max_output_bytes
  parsed->body = parse(tokenize(source), limits);
  parsed_ = std::move(parsed);
}

Template::~Template() = default;
Template::Template(const Template&) = default;
Template& Template::operator=(const Template&) = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

namespace {

// The context is converted under the render's budget: its values count
// against the same limits as the ones the template builds.
template <class Json>
std::string render_with(const Body& body, const Json& context, const Limits& limits) {
  if (!context.is_object()) throw TemplateError("chat template: the render context must be a JSON object");
  RenderBudget budget(limits);
  Dict variables;
  try {
    variables = Value::from_json(context).as_dict();
  } catch (const EvalFailure& f) {
    throw TemplateError("chat template: the render context: " + f.message);
  }
  return render(body, variables, budget);
}

}  // namespace

std::string Template::render(const nlohmann::ordered_json& context) const {
  return render_with(parsed_->body, context, limits_);
}

std::string Template::render(const nlohmann::json& context) const {
  return render_with(parsed_->body, context, limits_);
}

}  // namespace splitdec::jinja
