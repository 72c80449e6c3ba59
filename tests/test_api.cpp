// The public API (include/splitdec/) as an embedding program sees it:
// conversations on one engine, rewinds, media, errors that leave a
// conversation as it was, and batches that match the reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "splitdec/batch.h"
#include "splitdec/splitdec.h"
#include "test_support.h"

using namespace splitdec;

namespace {

std::shared_ptr<const Engine> engine_for(const std::string& preset) {
  static std::map<std::string, std::shared_ptr<const Engine>> engines;
  auto& e = engines[preset];
  if (!e) e = Engine::load(test::tiny_model_dir(preset));
  return e;
}

std::vector<float> image_rows(const Engine& e, int rows, float scale) {
  std::vector<float> v(size_t(rows) * size_t(e.hidden_size()));
  for (size_t k = 0; k < v.size(); ++k) v[k] = scale * float(int((k * 37) % 23) - 11) / 11.f;
  return v;
}

// One image's rows as an embeddings file in `dir` (Gemma-3's
// mm_tokens_per_image rows; 5 for Gemma-4's variable count); returns its path.
std::string image_file(const Engine& e, const std::string& preset, const std::string& dir) {
  const int rows = preset == "tiny-gemma3" ? 16 : 5;
  const std::vector<float> data = image_rows(e, rows, 1.f);
  write_npy(dir + "/img.npy", {rows, e.hidden_size()}, data.data());
  return dir + "/img.npy";
}

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.keep_step_logits = true;
  return o;
}

// What one conversation does: a user turn, a reply, an image, a reply.
struct Transcript {
  std::vector<std::string> replies;
  std::vector<std::vector<int>> tokens;
};

}  // namespace

// Two conversations of different lengths on one engine, interleaved: one
// appends an image and generates while the other is mid-conversation. Each
// transcript is what it is alone.
TEST(Api, ConversationsOnOneEngineDoNotMeet) {
  const auto engine = engine_for("tiny-gemma4");
  auto script = [&](Conversation& c, int step, float scale) {
    if (step == 0) c.append_user_turn(scale > 1 ? "a much longer first question about the cat" : "hi");
    if (step == 1) c.append_media(image_rows(*engine, 12, scale), 12);
    if (step == 2) c.append_user_turn("and now?");
    return c.generate(greedy(step == 1 ? 4 : 6));
  };
  Transcript alone_a, alone_b;
  {
    Conversation a(engine), b(engine);
    for (int s = 0; s < 3; ++s) alone_a.replies.push_back(script(a, s, 1.f)), alone_a.tokens.push_back(a.last_reply().tokens);
    for (int s = 0; s < 3; ++s) alone_b.replies.push_back(script(b, s, 1.5f)), alone_b.tokens.push_back(b.last_reply().tokens);
  }
  Conversation a(engine), b(engine);
  Transcript got_a, got_b;
  for (int s = 0; s < 3; ++s) {
    got_a.replies.push_back(script(a, s, 1.f)), got_a.tokens.push_back(a.last_reply().tokens);
    got_b.replies.push_back(script(b, s, 1.5f)), got_b.tokens.push_back(b.last_reply().tokens);
  }
  EXPECT_EQ(got_a.tokens, alone_a.tokens);
  EXPECT_EQ(got_b.tokens, alone_b.tokens);
  EXPECT_EQ(got_a.replies, alone_a.replies);
  EXPECT_NE(a.length(), b.length());
}

TEST(Api, RewindThenRegenerateGivesTheSameReply) {
  const auto engine = engine_for("tiny-gemma3");
  Conversation c(engine);
  c.append_user_turn("hello there");
  const std::string first = c.generate(greedy(5));
  const int64_t after_first = c.length();
  c.append_user_turn("tell me more");
  c.generate(greedy(5));
  // Back to the end of the first reply (its last token was never fed):
  // the conversation goes on from there.
  c.rewind(after_first);
  EXPECT_EQ(c.length(), after_first);
  c.append_user_turn("tell me more");
  c.generate(greedy(5));
  EXPECT_GT(c.length(), after_first);
  // Rewinding to 0 starts over: the first reply comes back.
  c.rewind(0);
  c.append_user_turn("hello there");
  EXPECT_EQ(c.generate(greedy(5)), first);
  EXPECT_THROW(c.rewind(c.length() + 1), InputError);
}

TEST(Api, AFailedTurnLeavesTheConversationAsItWas) {
  const auto engine = engine_for("tiny-gemma4");
  ConversationOptions small;
  small.max_length = 48;
  Conversation c(engine, small), twin(engine, small);
  for (Conversation* x : {&c, &twin}) {
    x->append_user_turn("hi");
    x->generate(greedy(3));
  }
  const int64_t before = c.length();
  // An image that does not fit the capacity: the turn fails as a whole.
  c.append_media(image_rows(*engine, 40, 1.f), 40);
  EXPECT_THROW(c.generate(greedy(3)), CapacityError);
  EXPECT_EQ(c.length(), before);
  // A prompt that leaves no room for a reply fails and is rolled back.
  c.append_media(image_rows(*engine, 48 - int(before) - 2, 1.f), 48 - before - 2);
  EXPECT_THROW(c.generate(greedy(3)), CapacityError);
  EXPECT_EQ(c.length(), before);
  // Bad inputs fail before anything is staged.
  EXPECT_THROW(c.append_media({1.f, 2.f}, 1), InputError);
  std::vector<float> nan_rows = image_rows(*engine, 2, 1.f);
  nan_rows[3] = std::nanf("");
  EXPECT_THROW(c.append_media(nan_rows, 2), InputError);
  GenerateOptions bad = greedy(2);
  bad.top_p = 2.f;
  c.append_user_turn("x");
  EXPECT_THROW(c.generate(bad), InputError);
  // The conversation goes on exactly as its twin that never failed.
  c.append_user_turn("again");
  twin.append_user_turn("again");
  EXPECT_EQ(c.generate(greedy(4)), twin.generate(greedy(4)));
  EXPECT_EQ(c.last_reply().tokens, twin.last_reply().tokens);
}

TEST(Api, AReplyThatFillsTheCacheStopsWithLengthAndKeepsItsTokens) {
  const auto engine = engine_for("tiny-gemma4");
  ConversationOptions small;
  small.max_length = 40;
  Conversation c(engine, small);
  c.append_user_turn("hi");
  GenerateOptions o = greedy(100);
  c.generate(o);
  EXPECT_EQ(c.last_reply().stop_reason == "length" || c.last_reply().stop_reason == "stop_token", true);
  if (c.last_reply().stop_reason == "length") {
    EXPECT_EQ(c.length(), 40);
    EXPECT_EQ(int64_t(c.last_reply().tokens.size()) + c.last_reply().prompt_tokens, 41);  // the last one is never fed
  }
  // A next turn cannot fit: a clear error, and the conversation is unchanged.
  c.append_user_turn("more");
  EXPECT_THROW(c.generate(o), CapacityError);
  EXPECT_LE(c.length(), 40);
}

TEST(Api, GenerateWithNothingNewContinuesTheReply) {
  const auto engine = engine_for("tiny-gemma3");
  Conversation c(engine), whole(engine);
  c.append_user_turn("count");
  whole.append_user_turn("count");
  GenerateOptions no_stop = greedy(3);
  c.generate(no_stop);
  const std::vector<int> part1 = c.last_reply().tokens;
  c.generate(no_stop);
  std::vector<int> joined = part1;
  joined.insert(joined.end(), c.last_reply().tokens.begin(), c.last_reply().tokens.end());
  whole.generate(greedy(6));
  const std::vector<int>& all = whole.last_reply().tokens;
  // Unless the first part ended on a stop token, continuing gives the same tokens.
  if (all.size() == 6) {
    EXPECT_EQ(joined, all);
  }
  Conversation empty(engine);
  EXPECT_THROW(empty.generate(greedy(2)), InputError);
}

TEST(Api, BatchMatchesTheReferenceAndTracesTheRouter) {
  const auto engine = engine_for("tiny-gemma4");
  TokenInputs turn = engine->encode_prompt("a long enough prompt about a cat and a mat", false);
  const TokenInputs image = [&] {
    TokenInputs t;
    t.batch = 1;
    t.tokens = {40, 6};
    t.modality = {Modality::Text, Modality::Text};
    for (int k = 0; k < 12; ++k) t.tokens.push_back(8), t.modality.push_back(Modality::Image);
    t.tokens.push_back(7), t.modality.push_back(Modality::Text);
    t.seq = int(t.tokens.size());
    t.media = image_rows(*engine, 12, 1.f);
    return t;
  }();
  std::vector<std::vector<int>> tokens;
  std::vector<std::vector<float>> logits;
  for (const char* plan : {"reference", "single", "split", "split-copy", "unified"}) {
    ConversationOptions o;
    o.plan = parse_execution_plan(plan);
    o.chunk = 4;
    o.max_length = 128;
    Batch b(engine, 1, o);
    b.run_turn(turn, greedy(4));
    b.run_turn(image, greedy(3));
    tokens.push_back(b.result().tokens[0]);
    logits.push_back(b.result().step_logits);
    if (std::string(plan) == "split") {
      bool masked = false;
      for (const TraceStep& s : b.trace()) masked = masked || s.path == "masked";
      EXPECT_TRUE(masked);
    }
    if (std::string(plan) == "reference") {
      EXPECT_TRUE(b.trace().empty());
    }
  }
  for (size_t p = 1; p < tokens.size(); ++p) {
    EXPECT_EQ(tokens[p], tokens[0]) << p;
    ASSERT_EQ(logits[p].size(), logits[0].size());
    for (size_t k = 0; k < logits[p].size(); ++k) ASSERT_NEAR(logits[p][k], logits[0][k], 2e-4) << p;
  }
  Batch b(engine, 2);
  EXPECT_THROW(b.run_turn(turn, greedy(2)), InputError);  // one sequence for a batch of two
}

// --weights q8 / q4: every plan gives the same tokens on block weights
// (they share the kernels), and the logits stay near the checkpoint's
// (random tiny weights: a numeric check of the format, not a quality claim).
// Returns the relative RMS error of the int8-activation and f32-activation
// logits.
std::pair<double, double> check_block_weights(const std::string& weights) {
  const std::string dir = test::tiny_model_dir("tiny-gemma4");
  const auto q = Engine::load(dir, LoadOptions{.weights = parse_weight_storage(weights), .progress = {}, .mmproj = {}});
  const auto full = engine_for("tiny-gemma4");
  TokenInputs turn = full->encode_prompt("a long enough prompt about a cat and a mat", false);
  auto run = [&](const std::shared_ptr<const Engine>& e, const char* plan) {
    ConversationOptions o;
    o.plan = parse_execution_plan(plan);
    o.chunk = 4;
    o.max_length = 128;
    Batch b(e, 1, o);
    b.run_turn(turn, greedy(6));
    return b.result();
  };
  // The plans against each other within float rounding. Against the
  // reference plan, the same tokens, and logits within one step of the
  // activations' int8 grid: its attention sums in another order, so a value
  // next to a grid midpoint may round the other way, and that row's logits
  // then move by up to a grid step times the weights (0.045 seen here).
  const auto reference = run(q, "reference");
  const auto want = run(q, "single");
  auto expect_near = [](const BatchResult& got, const BatchResult& want, double tolerance, const std::string& what) {
    EXPECT_EQ(got.tokens[0], want.tokens[0]) << what;
    EXPECT_EQ(got.step_logits.size(), want.step_logits.size());
    for (size_t k = 0; k < got.step_logits.size() && k < want.step_logits.size(); ++k)
      if (std::abs(got.step_logits[k] - want.step_logits[k]) > tolerance) {
        ADD_FAILURE() << what << " logit " << k << ": " << got.step_logits[k] << " vs " << want.step_logits[k];
        break;
      }
  };
  expect_near(reference, want, 0.1, "reference");
  for (const char* plan : {"split", "split-copy", "unified"}) expect_near(run(q, plan), want, 2e-4, plan);
  // Against the checkpoint's weights, teacher-forced on the same tokens.
  const auto base = run(full, "split");
  TokenInputs forced = turn;
  for (int t : base.tokens[0]) forced.tokens.push_back(t), forced.modality.push_back(Modality::Text);
  if (!forced.attention_mask.empty()) forced.attention_mask.resize(forced.tokens.size(), 1);
  forced.seq = int(forced.tokens.size());
  GenerateOptions g = greedy(1);
  g.keep_prompt_logits = true;
  auto logits = [&](const std::shared_ptr<const Engine>& e) {
    ConversationOptions o;
    o.chunk = 4;  // the decode kernels (int8 activations)
    Batch b(e, 1, o);
    b.run_turn(forced, g);
    return b.result().prompt_logits;
  };
  const std::vector<float> a = logits(full), b = logits(q);
  const auto f32act = Engine::load(dir, LoadOptions{.weights = parse_weight_storage(weights + "-f32act"), .progress = {}, .mmproj = {}});
  const std::vector<float> c = logits(f32act);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(a.size(), c.size());
  double err = 0, err2 = 0, scale = 0;
  for (size_t k = 0; k < a.size() && k < b.size() && k < c.size(); ++k)
    err += (a[k] - b[k]) * double(a[k] - b[k]), err2 += (a[k] - c[k]) * double(a[k] - c[k]), scale += double(a[k]) * a[k];
  std::printf("  %s logits: relative RMS error %.4f (f32 activations %.4f) over %zu positions\n", weights.c_str(),
              std::sqrt(err / scale), std::sqrt(err2 / scale), a.size() / size_t(full->vocab_size()));
  EXPECT_NE(b, c) << "int8 activations change the decode arithmetic";
  EXPECT_GT(err, 0.0) << "the weights were quantized";
  return {std::sqrt(err / scale), std::sqrt(err2 / scale)};
}

TEST(Api, Q8WeightsAgreeAcrossPlansAndStayNearTheCheckpoint) {
  const auto [rel, rel_f32act] = check_block_weights("q8");
  EXPECT_LT(rel, 0.15);  // measured 0.072 (6 tiny layers); see bench --only quantized for gemma3-1b
  EXPECT_LT(rel_f32act, 0.1);  // measured 0.049
  EXPECT_THROW(parse_weight_storage("q3"), InputError);
}

TEST(Api, Q4WeightsAgreeAcrossPlansAndStayNearTheCheckpoint) {
  const auto [rel, rel_f32act] = check_block_weights("q4");
  // Measured 0.59: 4-bit steps are 16x Q8_0's, and 6 random tiny layers
  // amplify weight noise ~18x (q8: 0.4% per weight, 7% in the logits), so
  // this only says the logits still follow the checkpoint's (unrelated
  // logits of the same scale give ~1.4). gemma3-1b: bench --only quantized.
  EXPECT_LT(rel, 0.85);
  EXPECT_LT(rel_f32act, 0.85);
}

TEST(Api, EngineErrorsAreTyped) {
  EXPECT_THROW(Engine::load(test::temp_dir("api-empty")), Error);
  const auto engine = engine_for("tiny-gemma3");
  ConversationOptions o;
  EXPECT_THROW(parse_execution_plan("fast"), InputError);
  o.plan = ExecutionPlan::Reference;  // a Batch's plan only
  EXPECT_THROW(Conversation(engine, o), InputError);
  o.plan = ExecutionPlan::Split;
  EXPECT_THROW(parse_kv_storage("f8"), InputError);
  EXPECT_THROW(set_threads(-1), InputError);
  o.max_length = int64_t(1) << 40;
  EXPECT_THROW(Conversation(engine, o), CapacityError);  // not std::bad_alloc
}

TEST(Api, AThrowingCallbackEndsTheTurnAndTheConversationGoesOn) {
  const auto engine = engine_for("tiny-gemma4");
  Conversation c(engine), twin(engine);
  c.append_user_turn("hi");
  EXPECT_THROW(c.generate(greedy(6), [](const std::string&) { throw std::runtime_error("client gone"); }), std::runtime_error);
  EXPECT_EQ(c.length(), 0);
  c.append_user_turn("hi");
  twin.append_user_turn("hi");
  EXPECT_EQ(c.generate(greedy(6)), twin.generate(greedy(6)));
  EXPECT_EQ(c.last_reply().tokens, twin.last_reply().tokens);
}

TEST(Api, SeededSamplingDrawsAFreshStreamEachTurn) {
  const auto engine = engine_for("tiny-gemma4");
  GenerateOptions o = greedy(8);
  o.temperature = 1.f;
  o.seed = 5;
  // Two turns of one conversation draw from one stream: the same seed in
  // two conversations gives the same transcript.
  Conversation a(engine), b(engine);
  for (Conversation* c : {&a, &b}) {
    c->append_user_turn("one");
    c->generate(o);
    c->append_user_turn("two");
    c->generate(o);
  }
  EXPECT_EQ(a.last_reply().tokens, b.last_reply().tokens);
  // A failed turn in between draws nothing from the stream.
  ConversationOptions small;
  small.max_length = 64;
  Conversation d(engine, small);
  d.append_user_turn("one");
  d.generate(o);
  d.append_media(image_rows(*engine, 60, 1.f), 60);
  EXPECT_THROW(d.generate(o), CapacityError);
  d.append_user_turn("two");
  d.generate(o);
  EXPECT_EQ(d.last_reply().tokens, a.last_reply().tokens);
  EXPECT_THROW([] {
    GenerateOptions bad;
    bad.top_p = 0.f;
    bad.validate();
  }(), InputError);
}

// An engine may be used by many threads at once (each conversation by one
// thread at a time): 4 threads x 2 engines x 20 generations, every reply
// identical to the one made on a single thread. Run under ASan in CI too.
TEST(Api, EnginesAreSafeToShareAcrossThreads) {
  const std::vector<std::shared_ptr<const Engine>> engines = {engine_for("tiny-gemma3"), engine_for("tiny-gemma4")};
  auto reply = [&](size_t e, int k) {
    Conversation c(engines[e]);
    c.append_user_turn("question number " + std::to_string(k % 5));
    c.generate(greedy(6));
    return c.last_reply().tokens;
  };
  std::vector<std::vector<std::vector<int>>> want(engines.size());
  for (size_t e = 0; e < engines.size(); ++e)
    for (int k = 0; k < 5; ++k) want[e].push_back(reply(e, k));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k)
        for (size_t e = 0; e < engines.size(); ++e)
          if (reply(e, k + t) != want[e][size_t((k + t) % 5)]) ++wrong;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A chat turn through the Conversation feeds exactly what encode_chat shows
// (the template, the system turn, the media expansion), and a later turn
// adds only what the template writes after the reply.
TEST(Api, ConversationChatTurnsGoThroughTheTemplate) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    const auto engine = engine_for(preset);
    const std::string image = image_file(*engine, preset, test::temp_dir("api-chat"));

    Conversation c(engine);
    c.set_system("Be brief.");
    c.append_image(image);
    c.append_user_turn("What is it?");
    c.generate(greedy(6));
    const TokenInputs in = engine->encode_chat(ChatTurn{.system = "Be brief.", .images = {image}, .audio = {}, .text = "What is it?", .media = {}});
    Batch b(engine, 1);
    b.run_turn(in, greedy(6));
    EXPECT_EQ(c.last_reply().tokens, b.result().tokens[0]) << preset;
    EXPECT_EQ(c.last_reply().prompt_tokens, in.seq) << preset;
    EXPECT_THROW(c.set_system("late"), InputError);

    // Turn 2: the pending end of turn (when the reply closed) and the template's next turn.
    const int64_t before = c.length();
    c.append_user_turn("And now?");
    c.generate(greedy(3));
    EXPECT_GT(c.last_reply().prompt_tokens, 4) << preset;
    EXPECT_EQ(c.length(), before + c.last_reply().prompt_tokens + int64_t(c.last_reply().tokens.size()) - 1) << preset;
  }
}

// A full chat goes on (issue 29): the oldest exchanges go whole, the system
// turn stays, and what is kept is the chat as the template renders those
// messages afresh: the next turn's reply equals a fresh run of
// [system, kept exchanges, new turn]. An image in a dropped turn goes with it.
TEST(Api, ForgettingTheOldestTurnsKeepsTheRestAsAFreshChat) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    SCOPED_TRACE(preset);
    const auto engine = engine_for(preset);
    Conversation c(engine);
    c.set_system("Be brief.");
    c.append_image(image_file(*engine, preset, test::temp_dir("api-forget")));
    c.append_user_turn("What is it?");
    c.generate(greedy(5));
    const int64_t first_turn = c.length();
    c.append_user_turn("second");
    const std::string second = c.generate(greedy(5));
    const int64_t before = c.length();
    // Room for half of what is there: the first exchange (with the image) goes.
    EXPECT_EQ(c.forget_oldest_turns(before - first_turn + 40), 1);
    EXPECT_LT(c.length(), before);
    c.append_user_turn("third");
    c.generate(greedy(4));
    const nlohmann::json messages = {{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "second"}},
                                     {{"role", "assistant"}, {"content", second}},
                                     {{"role", "user"}, {"content", "third"}}};
    Batch b(engine, 1);
    b.run_turn(engine->encode_messages(messages.dump()), greedy(4));
    EXPECT_EQ(c.last_reply().tokens, b.result().tokens[0]);
    // Nothing older than the system turn to drop, then: everything but it goes.
    EXPECT_EQ(c.forget_oldest_turns(0), 2);
    EXPECT_EQ(c.length(), 0);
    EXPECT_EQ(c.forget_oldest_turns(0), 0);
    c.append_user_turn("again");
    c.generate(greedy(3));
    Batch fresh(engine, 1);
    fresh.run_turn(engine->encode_chat(ChatTurn{.system = "Be brief.", .images = {}, .audio = {}, .text = "again", .media = {}}),
                   greedy(3));
    EXPECT_EQ(c.last_reply().tokens, fresh.result().tokens[0]) << "the system turn stayed";
  }
}

// Review findings: a second staged user turn is refused, a refused media file
// does not block later turns, a rewind into a reply lets the chat go on.
TEST(Api, ChatTurnEdgeCases) {
  const auto engine = engine_for("tiny-gemma3");
  const std::string dir = test::temp_dir("api-chat-edges");
  const std::vector<float> rows = image_rows(*engine, 3, 1.f);  // not mm_tokens_per_image
  write_npy(dir + "/bad.npy", {3, engine->hidden_size()}, rows.data());
  Conversation c(engine);
  c.set_system("Be brief.");
  c.append_image(dir + "/bad.npy");
  EXPECT_THROW(c.append_user_turn("what?"), InputError);
  c.append_user_turn("hello");  // the bad image went with the refused turn
  EXPECT_THROW(c.append_user_turn("again"), InputError);
  c.generate(greedy(4));
  const int64_t prompt_end = c.length() - int64_t(c.last_reply().tokens.size()) + 1;
  const int64_t cut = std::min(prompt_end + 1, c.length());  // inside the reply when it has 3+ tokens
  c.rewind(cut);
  c.append_user_turn("go on");
  EXPECT_NO_THROW(c.generate(greedy(3)));
  EXPECT_GT(c.length(), cut);
}

// The public options are enums; their names live only at the edges (flags,
// server fields), each parser the inverse of its name function, and an
// unknown name an InputError that lists the valid ones.
TEST(Api, PublicOptionsAreEnumsWhoseNamesRoundTrip) {
  for (ExecutionPlan p : {ExecutionPlan::Single, ExecutionPlan::Split, ExecutionPlan::SplitCopy, ExecutionPlan::Unified,
                          ExecutionPlan::Reference})
    EXPECT_EQ(parse_execution_plan(execution_plan_name(p)), p);
  for (KvStorage k : {KvStorage::F32, KvStorage::BF16, KvStorage::F16, KvStorage::Q8}) EXPECT_EQ(parse_kv_storage(kv_storage_name(k)), k);
  for (WeightStorage w : {WeightStorage::Checkpoint, WeightStorage::Q8, WeightStorage::Q4, WeightStorage::Q8F32Act,
                          WeightStorage::Q4F32Act})
    EXPECT_EQ(parse_weight_storage(weight_storage_name(w)), w);
  EXPECT_EQ(parse_weight_storage(""), WeightStorage::Checkpoint);
  EXPECT_EQ(parse_mask_policy(mask_policy_name(MaskPolicy::Gemma4)), MaskPolicy::Gemma4);
  auto message = [](auto parse, const char* name) {
    try {
      parse(name);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(parse_execution_plan, "fast").find("split-copy"), std::string::npos);
  EXPECT_NE(message(parse_kv_storage, "q4").find("bf16"), std::string::npos);
  EXPECT_NE(message(parse_weight_storage, "q3").find("q4-f32act"), std::string::npos);
  EXPECT_NE(message(parse_mask_policy, "sideways").find("gemma4"), std::string::npos);
}

// A plain prompt given as parts is the text prompt with placeholders, without
// the text round trip: the same ids and rows, and a path the placeholder
// syntax cannot carry (a '>') works.
TEST(Api, PromptPartsGiveTheTextPromptsInputsAndTakeAnyPath) {
  const auto engine = engine_for("tiny-gemma4");
  const std::string dir = test::temp_dir("api-parts");
  const std::string img = image_file(*engine, "tiny-gemma4", dir);
  const TokenInputs text = engine->encode_prompt("look <image:" + img + "> at this", false);
  const std::vector<PromptPart> parts = prompt_parts("look <image:" + img + "> at this");
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].kind, Modality::Image);
  EXPECT_EQ(parts[1].text, img);
  const TokenInputs by_parts = engine->encode_parts(parts);
  EXPECT_EQ(by_parts.tokens, text.tokens);
  EXPECT_EQ(by_parts.modality, text.modality);
  EXPECT_EQ(by_parts.media, text.media);

  const std::string odd = dir + "/a>b.npy";
  std::filesystem::copy_file(img, odd, std::filesystem::copy_options::overwrite_existing);
  const TokenInputs odd_parts =
      engine->encode_parts({{Modality::Text, "look "}, {Modality::Image, odd}, {Modality::Text, " at this"}});
  EXPECT_EQ(odd_parts.tokens, text.tokens);
  EXPECT_EQ(odd_parts.media, text.media);
  // Text parts are taken as they are: a placeholder in one stays text.
  const TokenInputs literal = engine->encode_parts({{Modality::Text, "look <image:" + img + "> at this"}});
  EXPECT_TRUE(literal.media.empty());
  EXPECT_THROW(engine->encode_parts({{Modality::Video, img}}), InputError);
  EXPECT_THROW(engine->encode_parts({{Modality::Image, dir + "/missing.npy"}}), Error);
}
