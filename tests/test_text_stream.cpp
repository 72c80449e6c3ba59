// A reply streamed in pieces adds up to the final text, and every piece is
// whole UTF-8 (a JSON writer turns a split character into U+FFFD), for any
// token sequence and any stop strings: a property over random seeds.
#include <gtest/gtest.h>

#include <random>

#include "generate/stop_strings.h"
#include "generate/text_stream.h"
#include "tokenizer/tokenizer.h"
#include "test_support.h"

namespace splitdec {
namespace {

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(TextStream, PiecesAreWholeCharactersAndAddUpToTheFinalText) {
  const auto tok = Tokenizer::open_dir(test::tiny_model_dir("tiny-gemma3"));
  ASSERT_NE(tok, nullptr);
  // Byte tokens (<0xE4> <0xB8> <0xAD> ...) make multi-byte characters and
  // unfinished runs; stop strings of multi-byte characters make the hold-back
  // end inside one.
  std::vector<int> bytes;
  for (int b = 0x80; b < 0x100; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (const int id = tok->piece_id(name); id >= 0) bytes.push_back(id);
  }
  ASSERT_FALSE(bytes.empty());
  const std::vector<std::string> stop_pool = {"中", "é", "ab", "\xE2\x82\xAC", "the", "é!", "z"};
  int pieces = 0, differing = 0;
  for (unsigned seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    std::vector<std::string> stops;
    for (int k = int(rng() % 3); k > 0; --k) stops.push_back(stop_pool[rng() % stop_pool.size()]);
    const StopStrings stop_strings(stops);
    TextStream stream(*tok, stop_strings);
    std::string streamed;
    const int length = 1 + int(rng() % 40);
    for (int i = 0; i < length; ++i) {
      const int token = rng() % 2 ? bytes[rng() % bytes.size()] : int(rng() % unsigned(tok->piece_count()));
      const bool stopped = stream.push(token);
      const std::string piece = stream.take_ready(stopped);
      EXPECT_TRUE(valid_utf8(piece)) << "seed " << seed << " token " << i;
      streamed += piece;
      ++pieces;
      if (stopped) break;
    }
    streamed += stream.take_ready(true);
    if (streamed != stream.text()) ++differing;
    EXPECT_EQ(streamed, stream.text()) << "seed " << seed;
  }
  EXPECT_EQ(differing, 0);
  EXPECT_GT(pieces, 1000);
}

}  // namespace
}  // namespace splitdec
