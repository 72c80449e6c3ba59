// What code built on the library inside it (the server) reads of a loaded
// Engine: its model, tokenizer, chat template, media frontend and the
// vocabulary trie, without the API's internals (api_internal.h: the
// engine's storage and the public-to-internal conversions).
#pragma once

#include <memory>

namespace splitdec {

class ChatTemplate;
class Engine;
class MediaFrontend;
class Model;
class Tokenizer;
class TokenTrie;

struct EngineParts {
  const Model& model;
  const Tokenizer* tokenizer;                     // null when the checkpoint has none
  const ChatTemplate& chat_template;              // the folder's, or the family's built-in
  std::shared_ptr<const MediaFrontend> frontend;  // null without media towers
};
EngineParts engine_parts(const Engine& e);

namespace api {
// The engine's vocabulary trie for structured output, built on first use (needs a tokenizer).
std::shared_ptr<const TokenTrie> vocabulary(const Engine& e);
}  // namespace api

}  // namespace splitdec
