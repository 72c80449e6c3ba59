// How many times a prompt's media rows are copied on their way from the
// file to the decoder's input (issue 33: "copied about six times"). Every
// copy of the rows into a vector of their own allocates exactly their size,
// so this binary counts the allocations of exactly that many bytes while a
// prompt is encoded and prefilled (operator new is replaced here, and only
// here). The image is an embeddings file of an odd row count so that no
// other buffer of the run (activations, logits, K/V) has that size.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "core/npy.h"
#include "splitdec/batch.h"
#include "splitdec/splitdec.h"
#include "test_support.h"

namespace {
std::atomic<size_t> g_watched_bytes{0};
std::atomic<int> g_watched_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (n != 0 && n == g_watched_bytes.load(std::memory_order_relaxed)) g_watched_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace splitdec;

namespace {

constexpr int64_t kRows = 301;

// An embeddings file of kRows random rows; the bytes its rows take.
std::pair<std::string, size_t> image_rows_file(const Engine& engine) {
  const int H = engine.hidden_size();
  std::vector<float> rows(size_t(kRows) * size_t(H));
  for (size_t k = 0; k < rows.size(); ++k) rows[k] = float(int(k % 17) - 8) / 8.f;
  const std::string path = test::temp_dir("media-copies") + "/image.npy";
  write_npy(path, {kRows, H}, rows.data());
  return {path, rows.size() * sizeof(float)};
}

// Copies of the watched rows made while `run` runs.
template <class Run>
int copies_during(size_t bytes, Run run) {
  g_watched_allocations = 0;
  g_watched_bytes = bytes;
  run();
  g_watched_bytes = 0;
  return g_watched_allocations.load();
}

}  // namespace

TEST(MediaCopies, APromptsImageRowsAreCopiedAFewTimesOnTheirWayToTheDecoder) {
  const auto engine = Engine::load(test::tiny_model_dir("tiny-gemma4"));
  const auto [path, bytes] = image_rows_file(*engine);
  GenerateOptions g;
  g.max_new_tokens = 1;
  ConversationOptions o;
  o.max_length = 512;
  o.chunk = 64;
  // `splitdec generate` with a plain prompt: encode, then one Batch turn.
  const int generate = copies_during(bytes, [&] {
    const TokenInputs in = engine->encode_prompt("<image:" + path + "> describe it", false);
    Batch b(engine, 1, o);
    b.run_turn(in, g);
  });
  // A Conversation: the image staged by path, one user turn, one reply.
  const int conversation = copies_during(bytes, [&] {
    Conversation c(engine, o);
    c.append_image(path);
    c.append_user_turn("describe it");
    c.generate(g);
  });
  std::printf("  copies of a prompt's media rows: generate (plain prompt) %d, conversation %d\n", generate, conversation);
  EXPECT_GE(generate, 1) << "the count sees nothing: the rows are read into a vector of their size at least once";
  EXPECT_GE(conversation, 1);
  // What is left: the rows read from the file; for generate, TokenInputs to
  // the batch's prompt (Batch::run_turn takes them by reference); the
  // decoder's input, where they are spliced (counted here because the
  // chunk holding the block is exactly its 301 rows). Before the copies were
  // cut (issue 33) this counted 7 and 8, and a copy per chunk that it cannot
  // see (the session gathered each chunk's rows) came on top.
  EXPECT_LE(generate, 3);
  EXPECT_LE(conversation, 2);
}
