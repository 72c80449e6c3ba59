// A JSON schema (or "any JSON object") compiled into the grammar that
// structured output samples under: a small graph of nodes a byte-level
// matcher (json_matcher.h) walks.
//
// Supported: type (one or a list), properties, required,
// additionalProperties, items, minItems, maxItems, minLength, maxLength,
// enum, const, anyOf / oneOf, $ref to any "#/..." pointer of the same
// document ($defs, definitions, recursion through an object or an array).
// Annotations are ignored (title, description, default, examples, format,
// $schema, $id, $comment, deprecated, readOnly, writeOnly); any other
// keyword is an InputError that names it and where it is.
//
// What is generated is always valid against the schema, not every valid
// document can be generated:
//  - an object with `properties` gets its properties in the schema's order,
//    each required one present, and no property the schema does not list
//    (whatever additionalProperties says);
//  - whitespace between two tokens is one space, or a newline and at most
//    kMaxIndent spaces or tabs; none before or after the value;
//  - oneOf is generated as anyOf (a value matching two alternatives is
//    possible; say so if it matters);
//  - a schema may allow no finite document (a required property that
//    refers back to its object): the reply then runs to max_tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace splitdec {

struct JsonNode {
  enum class Kind : uint8_t {
    Object,   // properties (in order), or a map of any keys to `additional`
    Array,    // items between min_items and max_items
    String,   // between min_length and max_length characters
    Number,   // JSON's number grammar
    Integer,  // a number without fraction or exponent
    Literal,  // exactly one of `literals` (enum / const values, true, false, null)
    Union,    // any of `alternatives` (flattened: none of them is a Union)
  };
  struct Property {
    std::string key;  // the key as it is written: JSON-encoded, quotes included
    int value = -1;
    bool required = false;
  };
  Kind kind = Kind::Literal;
  std::vector<Property> properties;  // Object: non-empty means no other keys
  int additional = -1;               // Object without properties: each value's node (-1: no keys at all)
  int items = -1;                    // Array
  int64_t min_count = 0;             // Array: items; String: characters
  int64_t max_count = -1;            // -1: unbounded
  std::vector<std::string> literals;  // Literal: the values as written, sorted, each once
  std::vector<int> alternatives;     // Union
};

struct JsonGrammar {
  std::vector<JsonNode> nodes;
  int root = -1;
};

// Indentation after a newline between two tokens: pretty-printing 16
// levels deep, not enough to stall a reply.
inline constexpr int kMaxIndent = 32;
// Bounds for a hostile schema: nodes and literal values compiled, nesting
// of its keywords, and the alternatives of one union (besides its literals,
// which form one node): a union is what a matcher steps through one by one.
inline constexpr size_t kMaxJsonNodes = 20000;
inline constexpr int kMaxSchemaDepth = 64;
inline constexpr size_t kMaxUnionAlternatives = 256;

// `where` names the schema in errors (e.g. "response_format.json_schema.schema").
// An ordered_json keeps the properties in the order the client wrote them.
JsonGrammar compile_json_schema(const nlohmann::ordered_json& schema, const std::string& where);
// Any JSON object (OpenAI's response_format {"type": "json_object"}).
JsonGrammar any_json_object_grammar();

}  // namespace splitdec
