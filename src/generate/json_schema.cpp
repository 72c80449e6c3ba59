#include "generate/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace splitdec {

using ojson = nlohmann::ordered_json;
using Kind = JsonNode::Kind;

namespace {

const std::set<std::string>& annotations() {
  static const std::set<std::string> names = {"title",   "description", "default",  "examples",  "format",
                                              "$schema", "$id",         "$comment", "deprecated", "readOnly",
                                              "writeOnly", "$defs",     "definitions"};
  return names;
}

// Keywords by the type they constrain; a keyword of another type than the
// one a schema has is a no-op (JSON Schema's rule), not an error.
const std::set<std::string>& object_keywords() {
  static const std::set<std::string> names = {"properties", "required", "additionalProperties"};
  return names;
}
const std::set<std::string>& array_keywords() {
  static const std::set<std::string> names = {"items", "minItems", "maxItems"};
  return names;
}
const std::set<std::string>& string_keywords() {
  static const std::set<std::string> names = {"minLength", "maxLength"};
  return names;
}
const std::set<std::string>& other_keywords() {
  static const std::set<std::string> names = {"type", "enum", "const", "anyOf", "oneOf", "$ref"};
  return names;
}

bool has_any(const ojson& s, const std::set<std::string>& names) {
  for (const auto& [key, value] : s.items())
    if (names.count(key)) return true;
  return false;
}

// "~1" and "~0" are a JSON pointer's escapes for "/" and "~".
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '/' ? "~1" : c == '~' ? "~0" : std::string(1, c);
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const ojson& root, std::string where) : root_(root), where_(std::move(where)) {}

  JsonGrammar run() {
    g_.root = resolve("#", 0);
    refuse_empty_loops();
    flatten_unions();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& why) const {
    throw InputError(where_ + (pointer == "#" ? "" : " at " + pointer.substr(1)) + ": " + why);
  }

  int add(JsonNode n, const std::string& pointer) {
    if (g_.nodes.size() >= kMaxJsonNodes)
      fail(pointer, "the schema compiles to more than " + std::to_string(kMaxJsonNodes) + " nodes");
    g_.nodes.push_back(std::move(n));
    return int(g_.nodes.size()) - 1;
  }
  int literal(const std::string& text, const std::string& pointer) {
    JsonNode n;
    n.kind = Kind::Literal;
    n.literals = {text};
    return add(std::move(n), pointer);
  }
  int union_of(std::vector<int> alternatives, const std::string& pointer) {
    if (alternatives.empty()) fail(pointer, "no alternative is left");
    if (alternatives.size() == 1) return alternatives[0];
    JsonNode n;
    n.kind = Kind::Union;
    n.alternatives = std::move(alternatives);
    return add(std::move(n), pointer);
  }

  // Any JSON value; one node for the whole grammar (it refers to itself).
  int any() {
    if (any_ >= 0) return any_;
    JsonNode u;
    u.kind = Kind::Union;
    any_ = add(std::move(u), "#");
    JsonNode object, array, string, number;
    object.kind = Kind::Object;
    object.additional = any_;
    array.kind = Kind::Array;
    array.items = any_;
    string.kind = Kind::String;
    number.kind = Kind::Number;
    std::vector<int> alts = {add(std::move(object), "#"), add(std::move(array), "#"), add(std::move(string), "#"),
                             add(std::move(number), "#"), literal("true", "#"), literal("false", "#"),
                             literal("null", "#")};
    g_.nodes[size_t(any_)].alternatives = std::move(alts);
    return any_;
  }

  // A schema reached by a $ref (or the root, "#"), compiled once: a later
  // $ref to it (recursion included) gets the same node.
  int resolve(const std::string& ref, int depth) {
    if (const auto it = by_pointer_.find(ref); it != by_pointer_.end()) return it->second;
    if (ref.empty() || ref[0] != '#') fail(ref, "$ref \"" + ref + "\": only references inside this schema (\"#/...\") are supported");
    const ojson* at = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') fail(ref, "$ref \"" + ref + "\" is not a JSON pointer");
      const size_t end = std::min(ref.find('/', i + 1), ref.size());
      std::string key;
      for (size_t k = i + 1; k < end; ++k) {
        if (ref[k] == '~' && k + 1 < end && (ref[k + 1] == '0' || ref[k + 1] == '1')) key += ref[++k] == '0' ? '~' : '/';
        else key += ref[k];
      }
      if (at->is_object() && at->contains(key)) at = &(*at)[key];
      else if (at->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               key.size() < 10 && std::stoul(key) < at->size())
        at = &(*at)[std::stoul(key)];
      else fail(ref, "$ref \"" + ref + "\" points at nothing in the schema");
      i = end;
    }
    // Reserved first, so that a recursive $ref finds it; filled as an alias.
    JsonNode alias;
    alias.kind = Kind::Union;
    const int slot = add(std::move(alias), ref);
    by_pointer_[ref] = slot;
    const int body = compile(*at, ref, depth + 1);
    g_.nodes[size_t(slot)].alternatives = {body};
    return slot;
  }

  int compile(const ojson& s, const std::string& pointer, int depth) {
    if (depth > kMaxSchemaDepth) fail(pointer, "the schema nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(pointer, "the schema false allows no value");
      return any();
    }
    if (!s.is_object()) fail(pointer, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key) || object_keywords().count(key) || array_keywords().count(key) ||
          string_keywords().count(key) || other_keywords().count(key))
        continue;
      if (key == "uniqueItems" && value == false) continue;
      fail(pointer, "the keyword \"" + key +
                        "\" is not supported (supported: type, properties, required, additionalProperties, items, "
                        "minItems, maxItems, minLength, maxLength, enum, const, anyOf, oneOf, $ref, $defs)");
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(pointer, "$ref must be a string");
      for (const auto& [key, value] : s.items())
        if (key != "$ref" && !annotations().count(key)) fail(pointer, "\"" + key + "\" beside $ref is not supported");
      return resolve(s["$ref"].get<std::string>(), depth);
    }
    for (const char* any_of : {"anyOf", "oneOf"}) {
      if (!s.contains(any_of)) continue;
      for (const auto& [key, value] : s.items())
        if (key != any_of && !annotations().count(key)) fail(pointer, "\"" + key + "\" beside " + any_of + " is not supported");
      const ojson& list = s[any_of];
      if (!list.is_array() || list.empty()) fail(pointer, std::string(any_of) + " must be a non-empty array of schemas");
      std::vector<int> alternatives;
      for (size_t i = 0; i < list.size(); ++i)
        alternatives.push_back(compile(list[i], pointer + "/" + any_of + "/" + std::to_string(i), depth + 1));
      return union_of(std::move(alternatives), pointer);
    }
    const std::vector<std::string> types = type_list(s, pointer);
    if (s.contains("enum") || s.contains("const")) return literals(s, types, pointer);
    if (types.empty()) return any();  // {} or annotations only
    std::vector<int> alternatives;
    for (const std::string& t : types) alternatives.push_back(typed(s, t, pointer, depth));
    return union_of(std::move(alternatives), pointer);
  }

  // The schema's types; without "type", the one its keywords imply, or all.
  std::vector<std::string> type_list(const ojson& s, const std::string& pointer) {
    static const std::set<std::string> known = {"object", "array", "string", "number", "integer", "boolean", "null"};
    std::vector<std::string> out;
    if (const auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) out.push_back(it->get<std::string>());
      else if (it->is_array() && !it->empty())
        for (const ojson& t : *it) out.push_back(t.is_string() ? t.get<std::string>() : t.dump());
      else fail(pointer, "type must be a type name or a non-empty list of them");
      for (const std::string& t : out)
        if (!known.count(t)) fail(pointer, "type \"" + t + "\" is not a JSON Schema type");
      return out;
    }
    if (has_any(s, object_keywords())) return {"object"};
    if (has_any(s, array_keywords())) return {"array"};
    if (has_any(s, string_keywords())) return {"string"};
    return {};  // any value
  }

  int literals(const ojson& s, const std::vector<std::string>& types, const std::string& pointer) {
    // The values are generated as written: what other keywords would say of
    // them is not checked, so they may not stand beside enum / const.
    for (const auto* names : {&object_keywords(), &array_keywords(), &string_keywords()})
      for (const auto& [key, value] : s.items())
        if (names->count(key)) fail(pointer, "\"" + key + "\" beside enum or const is not supported");
    std::vector<ojson> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) fail(pointer, "enum must be a non-empty array");
      if (s.contains("const")) fail(pointer, "enum beside const is not supported");
      for (const ojson& v : s["enum"]) values.push_back(v);
    }
    JsonNode n;
    n.kind = Kind::Literal;
    for (const ojson& v : values) {
      if (!types.empty() && !any_type_matches(v, types))
        fail(pointer, "the value " + v.dump() + " is not of the schema's type");
      if (++literal_count_ > kMaxJsonNodes)
        fail(pointer, "the schema holds more than " + std::to_string(kMaxJsonNodes) + " enum and const values");
      n.literals.push_back(v.dump());
    }
    return add(std::move(n), pointer);
  }

  static bool any_type_matches(const ojson& v, const std::vector<std::string>& types) {
    for (const std::string& t : types) {
      if ((t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
          (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()) ||
          (t == "integer" && (v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>()))))
        return true;
    }
    return false;
  }

  int64_t count(const ojson& s, const char* key, const std::string& pointer, int64_t otherwise) {
    const auto it = s.find(key);
    if (it == s.end()) return otherwise;
    if (!it->is_number_unsigned() || it->get<uint64_t>() > uint64_t(INT32_MAX))
      fail(pointer, std::string(key) + " must be an integer in [0, " + std::to_string(INT32_MAX) + "]");
    return it->get<int64_t>();
  }

  int typed(const ojson& s, const std::string& type, const std::string& pointer, int depth) {
    JsonNode n;
    if (type == "null") return literal("null", pointer);
    if (type == "boolean") {
      n.kind = Kind::Literal;
      n.literals = {"false", "true"};
      return add(std::move(n), pointer);
    }
    if (type == "number" || type == "integer") {
      n.kind = type == "number" ? Kind::Number : Kind::Integer;
      return add(std::move(n), pointer);
    }
    // A String's characters or an Array's items: [min, max] from the two keywords.
    auto bounds = [&](const char* min_key, const char* max_key) {
      n.min_count = count(s, min_key, pointer, 0);
      n.max_count = count(s, max_key, pointer, -1);
      if (n.max_count >= 0 && n.max_count < n.min_count) fail(pointer, std::string(max_key) + " is below " + min_key);
    };
    if (type == "string") {
      n.kind = Kind::String;
      bounds("minLength", "maxLength");
      return add(std::move(n), pointer);
    }
    if (type == "array") {
      n.kind = Kind::Array;
      bounds("minItems", "maxItems");
      if (const auto it = s.find("items"); it != s.end()) {
        if (it->is_array()) fail(pointer, "items as a list (tuples) is not supported");
        n.items = compile(*it, pointer + "/items", depth + 1);
      } else {
        n.items = any();
      }
      return add(std::move(n), pointer);
    }
    return object(s, pointer, depth);
  }

  int object(const ojson& s, const std::string& pointer, int depth) {
    JsonNode n;
    n.kind = Kind::Object;
    std::set<std::string> required;
    if (const auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) fail(pointer, "required must be an array of property names");
      for (const ojson& r : *it) {
        if (!r.is_string()) fail(pointer, "required must be an array of property names");
        required.insert(r.get<std::string>());
      }
    }
    const auto props = s.find("properties");
    if (props != s.end() && !props->is_object()) fail(pointer, "properties must be an object");
    if (const auto extra = s.find("additionalProperties");
        extra != s.end() && !extra->is_boolean() && props != s.end() && !props->empty())
      compile(*extra, pointer + "/additionalProperties", depth + 1);  // checked, though never generated beside properties
    if (const auto it = props; it != s.end() && !it->empty()) {
      for (const auto& [key, value] : it->items()) {
        JsonNode::Property p;
        p.key = ojson(key).dump();
        p.required = required.erase(key) > 0;
        p.value = compile(value, pointer + "/properties/" + pointer_token(key), depth + 1);
        n.properties.push_back(std::move(p));
      }
    } else if (const auto extra = s.find("additionalProperties"); extra != s.end() && *extra == false) {
      n.additional = -1;  // only {}
    } else {
      n.additional = extra == s.end() ? any() : compile(*extra, pointer + "/additionalProperties", depth + 1);
    }
    // Generated objects hold listed properties only: a required one that is
    // not listed could never be written.
    if (!required.empty()) fail(pointer, "required names \"" + *required.begin() + "\", which properties does not list");
    return add(std::move(n), pointer);
  }

  // A Union that reaches itself through Unions only would expand forever
  // ({"$ref": "#"}, or anyOf: [{"$ref": "#"}]): refused.
  void refuse_empty_loops() const {
    std::vector<uint8_t> state(g_.nodes.size(), 0);  // 0 new, 1 on the path, 2 done
    auto visit = [&](auto&& self, int node, int depth) -> void {
      if (g_.nodes[size_t(node)].kind != Kind::Union || state[size_t(node)] == 2) return;
      if (state[size_t(node)] == 1) fail("#", "a $ref refers to itself without an object or array between");
      if (depth > 4 * kMaxSchemaDepth) fail("#", "a chain of $ref / anyOf is more than " + std::to_string(4 * kMaxSchemaDepth) + " deep");
      state[size_t(node)] = 1;
      for (int a : g_.nodes[size_t(node)].alternatives) self(self, a, depth + 1);
      state[size_t(node)] = 2;
    };
    for (size_t i = 0; i < g_.nodes.size(); ++i) visit(visit, int(i), 0);
  }

  // Every Union's alternatives become the non-Union nodes it reaches, each
  // once, its literals merged into one Literal node: a matcher expands a
  // union in one pass, and an enum is one parse however many values it has.
  void flatten_unions() {
    const size_t compiled = g_.nodes.size();
    std::vector<size_t> stamp(compiled, SIZE_MAX);  // the union whose walk saw a node last
    std::vector<int> leaves, todo;
    for (size_t u = 0; u < compiled; ++u) {
      if (g_.nodes[u].kind != Kind::Union) continue;
      leaves.clear();
      todo.assign(1, int(u));
      while (!todo.empty()) {  // no recursion: a chain of $ref aliases may be long
        const int node = todo.back();
        todo.pop_back();
        if (size_t(node) >= stamp.size()) stamp.resize(g_.nodes.size(), SIZE_MAX);
        if (stamp[size_t(node)] == u) continue;
        stamp[size_t(node)] = u;
        const JsonNode& n = g_.nodes[size_t(node)];
        if (n.kind != Kind::Union) leaves.push_back(node);
        else todo.insert(todo.end(), n.alternatives.rbegin(), n.alternatives.rend());
      }
      std::vector<int> alternatives;
      std::vector<std::string> literals;
      for (int leaf : leaves) {
        if (g_.nodes[size_t(leaf)].kind != Kind::Literal) alternatives.push_back(leaf);
        else for (const std::string& l : g_.nodes[size_t(leaf)].literals) literals.push_back(l);
      }
      if (alternatives.size() > kMaxUnionAlternatives)
        fail("#", "a union (anyOf, oneOf, a type list or a $ref) reaches " + std::to_string(alternatives.size()) +
                      " alternatives; at most " + std::to_string(kMaxUnionAlternatives) + " (besides enum values) are supported");
      merged_literals_ += literals.size();
      if (merged_literals_ > 4 * kMaxJsonNodes)
        fail("#", "the schema's unions hold more than " + std::to_string(4 * kMaxJsonNodes) + " enum and const values in all");
      if (!literals.empty()) {
        JsonNode merged;
        merged.kind = Kind::Literal;
        merged.literals = std::move(literals);
        alternatives.push_back(add(std::move(merged), "#"));
      }
      g_.nodes[u].alternatives = std::move(alternatives);
    }
    for (JsonNode& n : g_.nodes) {
      if (n.kind != Kind::Literal) continue;
      std::sort(n.literals.begin(), n.literals.end());
      n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    }
  }

  const ojson& root_;
  std::string where_;
  JsonGrammar g_;
  std::map<std::string, int> by_pointer_;
  int any_ = -1;
  size_t literal_count_ = 0, merged_literals_ = 0;
};

}  // namespace

JsonGrammar compile_json_schema(const ojson& schema, const std::string& where) { return SchemaCompiler(schema, where).run(); }

JsonGrammar any_json_object_grammar() {
  return compile_json_schema(ojson::parse(R"({"type": "object"})"), "response_format");
}

}  // namespace splitdec
