// Sequences on their own: each KV slot of a session has its own length, a
// prefill or decode step takes any subset of live sequences, slots are
// reused, and the step-wise generator lets requests join and leave between
// steps - all without changing a single logit against running alone.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "generate/generator.h"
#include "generate/step_generator.h"
#include "model/reference_forward.h"
#include "pipeline/session.h"
#include "test_prompts.h"
#include "test_support.h"

using namespace splitdec;
using test::batch_of;
using test::SeqBuilder;

namespace {

int argmax(const float* x, int n) { return int(std::max_element(x, x + n) - x); }

SessionOptions options_for(Plan plan, int sequences) {
  SessionOptions o;
  o.plan = plan;
  o.chunk = 5;
  o.capacity = 96;
  o.max_sequences = sequences;
  return o;
}

// One sequence's script: a prompt, greedy decode steps, then a second
// prompt holding an image, then more steps. Records every logit row.
struct Script {
  PromptBatch first, second;
  int steps1 = 0, steps2 = 0;
};

struct Recording {
  std::vector<float> logits;  // every row the sequence produced, in order
  std::vector<int> tokens;
};

// The script run alone, in a session of its own.
Recording run_alone(const Model& m, Plan plan, const Script& s) {
  Session session(m, 1, options_for(plan, 1));
  Recording r;
  const int V = m.config().vocab_size;
  auto take = [&](const std::vector<float>& l) {
    r.logits.insert(r.logits.end(), l.begin(), l.end());
    r.tokens.push_back(argmax(l.data(), V));
  };
  take(session.append(s.first));
  for (int k = 0; k < s.steps1; ++k) take(session.decode({r.tokens.back()}));
  take(session.append(s.second));
  for (int k = 0; k < s.steps2; ++k) take(session.decode({r.tokens.back()}));
  return r;
}

Script script_a(const ModelConfig& c) {
  Script s;
  s.first = batch_of({SeqBuilder(c, 21).text(9)}, 0);
  s.second = batch_of({SeqBuilder(c, 22).no_bos().text(2).media(Modality::Image, 12).text(2)}, 0);
  s.steps1 = 6, s.steps2 = 4;
  return s;
}

Script script_b(const ModelConfig& c) {
  Script s;
  s.first = batch_of({SeqBuilder(c, 31).text(3).media(Modality::Image, 10).text(3)}, 0);
  s.second = batch_of({SeqBuilder(c, 32).no_bos().text(4)}, 0);
  s.steps1 = 3, s.steps2 = 6;
  return s;
}

class Interleaved : public ::testing::TestWithParam<std::tuple<std::string, Plan>> {};

}  // namespace

// Two sequences of different lengths in one session, interleaved: B appends
// a prompt with an image while A decodes, A appends an image while B
// decodes, and some steps decode both at once. Each gets exactly the logits
// it gets alone.
TEST_P(Interleaved, TwoSequencesMatchRunningAlone) {
  const auto& [preset, plan] = GetParam();
  const Model& m = test::tiny_model(preset);
  const int V = m.config().vocab_size;
  const Script sa = script_a(m.config()), sb = script_b(m.config());
  const Recording want_a = run_alone(m, plan, sa), want_b = run_alone(m, plan, sb);

  Session session(m, 0, options_for(plan, 3));
  const int a = session.open_sequence(), b = session.open_sequence();
  Recording got_a, got_b;
  auto take = [&](Recording& r, const float* l) {
    r.logits.insert(r.logits.end(), l, l + V);
    r.tokens.push_back(argmax(l, V));
  };
  take(got_a, session.append({a}, sa.first).data());
  for (int k = 0; k < 3; ++k) take(got_a, session.decode({a}, {got_a.tokens.back()}).data());  // A decodes alone
  take(got_b, session.append({b}, sb.first).data());                                          // B's image prompt
  for (int k = 0; k < 3; ++k) {  // both decode in one call
    const auto l = session.decode({b, a}, {got_b.tokens.back(), got_a.tokens.back()});
    take(got_b, l.data());
    take(got_a, l.data() + V);
  }
  take(got_a, session.append({a}, sa.second).data());  // A's image while B waits
  take(got_b, session.append({b}, sb.second).data());
  EXPECT_NE(session.length(a), session.length(b));
  for (int k = 0; k < 4; ++k) {
    const auto l = session.decode({a, b}, {got_a.tokens.back(), got_b.tokens.back()});
    take(got_a, l.data());
    take(got_b, l.data() + V);
  }
  for (int k = 0; k < 2; ++k) take(got_b, session.decode({b}, {got_b.tokens.back()}).data());
  // A chose 1 + 3 + 3 tokens before its second prompt, B 1 + 3: as the scripts say.
  ASSERT_EQ(got_a.tokens, want_a.tokens);
  ASSERT_EQ(got_b.tokens, want_b.tokens);
  EXPECT_EQ(got_a.logits, want_a.logits);
  EXPECT_EQ(got_b.logits, want_b.logits);
}

INSTANTIATE_TEST_SUITE_P(Plans, Interleaved,
                         ::testing::Combine(::testing::Values("tiny-gemma3", "tiny-gemma4", "tiny-gemma4-ple", "tiny-gemma4-moe"),
                                            ::testing::Values(Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + plan_name(std::get<1>(info.param));
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(SessionSlots, ClosedSlotsAreReusedAndStartEmpty) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const Script sa = script_a(m.config());
  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy}) {
    Session session(m, 0, options_for(plan, 2));
    const int a = session.open_sequence(), b = session.open_sequence();
    EXPECT_THROW(session.open_sequence(), CapacityError);
    session.append({a}, batch_of({SeqBuilder(m.config(), 5).text(30)}, 0));
    session.close_sequence(a);
    EXPECT_FALSE(session.live(a));
    EXPECT_THROW(session.decode({a}, {40}), InputError);
    const int again = session.open_sequence();
    EXPECT_EQ(again, a);
    EXPECT_EQ(session.length(again), 0);
    // The reused slot gives what a fresh session gives.
    Session fresh(m, 1, options_for(plan, 1));
    EXPECT_EQ(session.append({again}, sa.first), fresh.append(sa.first)) << plan_name(plan);
    EXPECT_EQ(session.decode({again}, {50}), fresh.decode({50})) << plan_name(plan);
    EXPECT_EQ(session.length(b), 0);
  }
}

// A closed slot keeps its KV: reopened (open_sequence(seq)) and rewound to
// a prefix, it continues bit for bit as a session that only ever held that
// prefix; open_sequence() picks an empty slot first, then the one closed
// longest ago, and empties it; can_rewind() answers for free slots too.
TEST(SessionSlots, AClosedSlotKeepsItsKvUntilOpenedEmpty) {
  const Model& m = test::tiny_model("tiny-gemma3");
  const PromptBatch prefix = batch_of({SeqBuilder(m.config(), 3).text(6).media(Modality::Image, 16).text(3)}, 0);
  const PromptBatch tail = batch_of({SeqBuilder(m.config(), 4).no_bos().text(7)}, 0);
  const PromptBatch rest = batch_of({SeqBuilder(m.config(), 5).no_bos().text(4)}, 0);
  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified}) {
    SCOPED_TRACE(plan_name(plan));
    Session session(m, 0, options_for(plan, 3));
    const int a = session.open_sequence();
    session.append({a}, prefix);
    session.append({a}, tail);
    session.decode({a}, {60});
    const int64_t held = session.length(a);
    session.close_sequence(a);
    EXPECT_FALSE(session.live(a));
    // Free slots: can_rewind answers; a cut inside the image block is refused, its edges are not.
    EXPECT_TRUE(session.can_rewind(a, prefix.seq));
    EXPECT_TRUE(session.can_rewind(a, 7));
    EXPECT_FALSE(session.can_rewind(a, 10));
    EXPECT_FALSE(session.can_rewind(a, held + 1));
    EXPECT_FALSE(session.can_rewind(99, 0));
    // open_sequence() takes the slots that hold nothing before a.
    const int b = session.open_sequence(), c = session.open_sequence();
    EXPECT_NE(b, a);
    EXPECT_NE(c, a);
    session.close_sequence(c);
    session.close_sequence(b);
    EXPECT_THROW(session.open_sequence(99), InputError);
    session.open_sequence(a);
    EXPECT_THROW(session.open_sequence(a), InputError);
    EXPECT_EQ(session.length(a), held);
    session.rewind(a, prefix.seq);
    Session fresh(m, 1, options_for(plan, 1));
    fresh.append(prefix);
    EXPECT_EQ(session.append({a}, rest), fresh.append(rest));
    EXPECT_EQ(session.decode({a}, {70}), fresh.decode({70}));
    session.close_sequence(a);
    // The slots that hold nothing (b, c) first, then a.
    const int first = session.open_sequence(), second = session.open_sequence(), third = session.open_sequence();
    EXPECT_EQ(third, a);  // closed last
    EXPECT_EQ(session.length(first), 0);
    EXPECT_EQ(session.length(second), 0);
    EXPECT_EQ(session.length(third), 0);
  }
}

// copy_sequence gives a second slot what the first holds (a prompt
// prefilled once, several replies): each slot then goes on bit for bit as a
// session that prefilled the prompt itself, under every plan and KV storage,
// with sliding rings that wrapped and a media block a rewind may not cut.
TEST(SessionSlots, ACopiedSlotGoesOnAsASessionThatPrefilledItself) {
  const Model& m = test::tiny_model("tiny-gemma4");  // window 8
  const ModelConfig& c = m.config();
  const PromptBatch prompt = batch_of({SeqBuilder(c, 7).text(5).media(Modality::Image, 10).text(6)}, 0);
  for (DType storage : {DType::F32, DType::BF16, DType::I8})
    for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified}) {
      SCOPED_TRACE(std::string(plan_name(plan)) + " " + dtype_name(storage));
      SessionOptions o = options_for(plan, 3);
      o.kv_dtype = storage;
      o.chunk = 4;
      o.max_chunk = 4;  // rings of 12 positions (the image's chunk grows them to 18): the decoded tail wraps them
      Session s(m, 0, o), alone_a(m, 1, o), alone_b(m, 1, o);
      const int a = s.open_sequence(), b = s.open_sequence();
      s.append({b}, batch_of({SeqBuilder(c, 8).text(20)}, 0));  // b held something else before
      EXPECT_EQ(s.append({a}, prompt), alone_a.append(prompt));
      alone_b.append(prompt);
      for (int t : {40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52})
        EXPECT_EQ(s.decode({a}, {t}), alone_a.decode({t})) << t;  // 35 positions: the rings wrapped
      for (int t : {40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52}) alone_b.decode({t});
      s.copy_sequence(a, b);
      EXPECT_EQ(s.length(b), s.length(a));
      // Apart from here: different tokens, one call and separate calls.
      for (int k = 0; k < 4; ++k) {
        const std::vector<float> both = s.decode({b, a}, {60 + k, 70 + k});
        const std::vector<float> want_b = alone_b.decode({60 + k}), want_a = alone_a.decode({70 + k});
        const size_t V = size_t(c.vocab_size);
        EXPECT_TRUE(std::equal(want_b.begin(), want_b.end(), both.begin())) << "b, step " << k;
        EXPECT_TRUE(std::equal(want_a.begin(), want_a.end(), both.begin() + long(V))) << "a, step " << k;
      }
      const PromptBatch more = batch_of({SeqBuilder(c, 9).no_bos().text(3).media(Modality::Image, 6).text(2)}, 0);
      EXPECT_EQ(s.append({b}, more), alone_b.append(more));
      // The media block came with the copy: a rewind into it is refused on b too.
      EXPECT_FALSE(s.can_rewind(b, 8));
    }
  const Model& g3 = test::tiny_model("tiny-gemma3");
  Session s(g3, 0, options_for(Plan::Split, 2));
  const int a = s.open_sequence();
  EXPECT_THROW(s.copy_sequence(a, 1), InputError);  // slot 1 is not open
  EXPECT_THROW(s.copy_sequence(a, a), InputError);
}

TEST(SessionSlots, BadSequenceListsAreClearErrors) {
  const Model& m = test::tiny_model("tiny-gemma3");
  Session session(m, 2, options_for(Plan::Split, 2));
  const PromptBatch one = batch_of({SeqBuilder(m.config(), 1).text(4)}, 0);
  EXPECT_THROW(session.append({0, 1}, one), InputError);  // two sequences, one row
  EXPECT_THROW(session.append({5}, one), InputError);     // no such slot
  EXPECT_THROW(session.decode({0, 0}, {40, 41}), InputError);  // twice
  EXPECT_THROW(session.decode({1}, {40}), InputError);    // nothing appended yet
  session.append({1}, one);
  EXPECT_EQ(session.length(0), 0);
  EXPECT_EQ(session.length(1), 5);
  // Rewinding one sequence leaves the other alone.
  session.append({0}, batch_of({SeqBuilder(m.config(), 2).text(8)}, 0));
  session.rewind(1, 2);
  EXPECT_EQ(session.length(1), 2);
  EXPECT_EQ(session.length(0), 9);
}

TEST(StepGenerator, RequestsJoinAndLeaveBetweenStepsWithoutChangingTokens) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const ModelConfig& c = m.config();
  const std::vector<PromptBatch> prompts = {
      batch_of({SeqBuilder(c, 41).text(6)}, 0),
      batch_of({SeqBuilder(c, 42).text(2).media(Modality::Image, 11).text(2)}, 0),
      batch_of({SeqBuilder(c, 43).text(13)}, 0),
  };
  const std::vector<int> budgets = {9, 5, 7};
  RequestOptions ro;
  ro.keep_step_logits = true;
  ro.stop_tokens = {-5};  // none: every request runs its budget
  // Alone.
  std::vector<Request> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Session s(m, 1, options_for(Plan::Split, 1));
    SessionSource src(s);
    StepGenerator g(src, c, nullptr);
    ro.max_new_tokens = budgets[i];
    const int id = g.start({0}, prompts[i], {ro})[0];
    while (g.step()) {
    }
    alone.push_back(g.request(id));
  }
  // Together: 0 starts, 1 joins after two steps, 2 joins after four, 0 is
  // cancelled after six; each finishes on its own budget.
  Session s(m, 0, options_for(Plan::Split, 3));
  SessionSource src(s);
  StepGenerator g(src, c, nullptr);
  std::vector<int> ids(3, -1);
  auto start = [&](size_t i) {
    ro.max_new_tokens = budgets[i];
    ids[i] = g.start({s.open_sequence()}, prompts[i], {ro})[0];
  };
  start(0);
  for (int k = 0; k < 8; ++k) {
    if (k == 2) start(1);
    if (k == 4) start(2);
    if (k == 6) g.cancel(ids[0]);
    g.step();
  }
  while (g.step()) {
  }
  EXPECT_EQ(g.request(ids[0]).stop_reason, StopReason::Cancelled);
  const std::vector<int>& cut = g.request(ids[0]).tokens;
  EXPECT_EQ(cut, std::vector<int>(alone[0].tokens.begin(), alone[0].tokens.begin() + long(cut.size())));
  EXPECT_EQ(g.pending(g.request(ids[0]).seq), cut.back());
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(g.request(ids[i]).tokens, alone[i].tokens) << i;
    EXPECT_EQ(g.request(ids[i]).step_logits, alone[i].step_logits) << i;
    EXPECT_EQ(g.request(ids[i]).stop_reason, StopReason::MaxTokens);
  }
  EXPECT_FALSE(g.any_live());
  EXPECT_THROW(g.start({g.request(ids[1]).seq}, prompts[0], {ro, ro}), InputError);  // one row, two options
}

TEST(StepGenerator, HistoryFollowsPositionsAcrossRequests) {
  const Model& m = test::tiny_model("tiny-gemma3");
  Session s(m, 1, options_for(Plan::Split, 1));
  SessionSource src(s);
  StepGenerator g(src, m.config(), nullptr);
  RequestOptions ro;
  ro.max_new_tokens = 4;
  ro.stop_tokens = {-5};
  for (int turn = 0; turn < 3; ++turn) {
    const int id = g.start({0}, batch_of({SeqBuilder(m.config(), 70 + turn).text(3)}, 0), {ro})[0];
    while (g.step()) {
    }
    g.release(id);
    // Every fed position once, plus the chosen token not fed yet.
    EXPECT_EQ(int64_t(g.history(0).size()), s.length(0) + 1) << turn;
    EXPECT_EQ(g.history(0).back(), g.pending(0));
  }
  // Only some sequences pending: their tokens join their own rows.
  Session two(m, 2, options_for(Plan::Split, 2));
  SessionSource src2(two);
  StepGenerator g2(src2, m.config(), nullptr);
  const PromptBatch p = batch_of({SeqBuilder(m.config(), 80).text(3)}, 0);
  g2.start({0}, p, {ro});
  while (g2.step()) {
  }
  const int64_t before = two.length(0);
  std::vector<float> all_positions;
  EXPECT_THROW(g2.start({0, 1}, batch_of({SeqBuilder(m.config(), 81).text(2), SeqBuilder(m.config(), 82).text(2)}, 0), {ro, ro},
                        &all_positions),
               InputError);
  EXPECT_EQ(two.length(0), before);  // refused before anything was fed
  g2.start({0, 1}, batch_of({SeqBuilder(m.config(), 81).no_bos().text(2), SeqBuilder(m.config(), 82).text(1)}, 0), {ro, ro});
  EXPECT_EQ(two.length(0), before + 1 + 2);
  EXPECT_EQ(two.length(1), 2);
}

// prefill() feeds a prompt piece (after the pending token) and chooses
// nothing: a prompt fed in pieces then started gives the tokens and logits
// of the whole prompt started at once; a live request's sequence is refused
// before anything is fed.
TEST(StepGenerator, PrefilledPiecesThenStartEqualStartingWhole) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const PromptBatch whole = batch_of({SeqBuilder(m.config(), 90).text(5).media(Modality::Image, 6).text(4)}, 0);
  const int image = int(std::find(whole.modality.begin(), whole.modality.end(), Modality::Image) - whole.modality.begin());
  RequestOptions ro;
  ro.max_new_tokens = 5;
  ro.stop_tokens = {-5};
  ro.keep_step_logits = true;
  auto run = [&](bool pieces) {
    Session s(m, 1, options_for(Plan::Split, 1));
    SessionSource src(s);
    StepGenerator g(src, m.config(), nullptr);
    int id = -1;
    if (pieces) {
      g.prefill({0}, whole.slice(0, image));
      EXPECT_EQ(g.history(0).size(), size_t(image));
      EXPECT_EQ(g.pending(0), -1);
      g.prefill({0}, whole.slice(image, image + 6));  // the image whole
      id = g.start({0}, whole.slice(image + 6, whole.seq), {ro})[0];
    } else {
      id = g.start({0}, whole, {ro})[0];
    }
    while (g.step()) {
    }
    if (pieces) {
      EXPECT_THROW(g.prefill({0, 0}, whole), InputError);  // rows and sequences disagree
    }
    return g.request(id);
  };
  const Request a = run(false), b = run(true);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.step_logits, b.step_logits);
  Session s(m, 1, options_for(Plan::Split, 1));
  SessionSource src(s);
  StepGenerator g(src, m.config(), nullptr);
  g.start({0}, whole.slice(0, image), {ro});
  EXPECT_THROW(g.prefill({0}, whole.slice(image, image + 6)), InputError);  // sequence 0 has a live request
  EXPECT_EQ(s.length(0), image);
}

// A property test: random appends (text and images, some longer than the
// rings were sized for, some image runs joined by a video run), decode
// steps, rewinds and calls that must fail, on a session with small rings, checked after
// every call against the oracle recomputing the whole sequence from scratch.
// A failing call must leave the session exactly as it was.
TEST(SessionProperty, RandomCallsMatchTheOracleAndFailuresChangeNothing) {
  const Model& m = test::tiny_model("tiny-gemma4");  // window 8
  const ModelConfig& c = m.config();
  const int V = c.vocab_size, H = c.hidden_size;
  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified}) {
    int grown_seeds = 0;  // seeds whose rings grew for a long block (later ops then check grown rings)
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SessionOptions o;
      o.plan = plan;
      o.chunk = 4;
      o.max_chunk = 8;  // rings of 16 positions at first
      o.capacity = 72;
      Session s(m, 1, o);
      std::mt19937 rng(seed * 7919 + uint32_t(plan));
      std::vector<int> tokens;
      std::vector<Modality> modality;
      std::vector<float> media;  // rows of the image positions, in order
      bool grown_by_blocks = false;
      auto oracle_last = [&] {
        PromptBatch p;
        p.batch = 1, p.seq = int(tokens.size()), p.tokens = tokens, p.modality = modality;
        p.attention_mask.assign(tokens.size(), 1);
        p.media = media;
        const std::vector<float> all = reference_logits(m, p, s.policy());
        return std::vector<float>(all.end() - V, all.end());
      };
      auto expect_matches = [&](const std::vector<float>& got, const std::string& what) {
        const std::vector<float> want = oracle_last();
        float worst = 0;
        for (int k = 0; k < V; ++k) worst = std::max(worst, std::fabs(got[size_t(k)] - want[size_t(k)]));
        EXPECT_LE(worst, 2e-4f) << plan_name(plan) << " seed " << seed << ": " << what;
      };
      for (int op = 0; op < 30; ++op) {
        const int64_t before = s.length();
        const int kind = tokens.empty() ? 0 : int(rng() % 5);
        if (kind == 0 || kind == 1) {  // append text, sometimes with an image block
          SeqBuilder b(c, rng());
          if (!tokens.empty()) b.no_bos();
          b.text(1 + int(rng() % 4));
          if (kind == 1) {
            // Short images; long ones, past what the rings were first sized
            // for (they grow); an image run directly followed by a video run
            // (one block).
            const int n = rng() % 3 == 0 ? 9 + int(rng() % 14) : 2 + int(rng() % 5);
            if (rng() % 4 == 0) b.media_runs({{Modality::Image, n}, {Modality::Video, 1 + int(rng() % 4)}});
            else b.media(Modality::Image, n);
            b.text(1);
          }
          const PromptBatch p = batch_of({b}, 0);
          if (before + p.seq > o.capacity) {
            EXPECT_THROW(s.append(p), CapacityError);
          } else {
            const std::vector<float> got = s.append(p);
            tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
            modality.insert(modality.end(), p.modality.begin(), p.modality.end());
            media.insert(media.end(), p.media.begin(), p.media.end());
            expect_matches(got, "append");
            grown_by_blocks = grown_by_blocks || s.memory().sliding_slots > 16;
          }
        } else if (kind == 2) {  // a decode step
          const int t = 20 + int(rng() % uint32_t(V - 20));
          if (before >= o.capacity) {
            EXPECT_THROW(s.decode({t}), CapacityError);
          } else {
            const std::vector<float> got = s.decode({t});
            tokens.push_back(t), modality.push_back(Modality::Text);
            expect_matches(got, "decode");
          }
        } else if (kind == 3) {  // a rewind: allowed, or refused with nothing changed
          const int64_t to = int64_t(rng() % uint32_t(before + 1));
          try {
            s.rewind(to);
          } catch (const CapacityError&) {  // a ring dropped the window's keys
            EXPECT_NE(plan, Plan::Single);
            continue;
          } catch (const InputError& e) {  // it would cut a media block
            EXPECT_NE(std::string(e.what()).find("media block"), std::string::npos) << e.what();
            continue;
          }
          int64_t image_rows = 0;
          for (int64_t k = 0; k < to; ++k) image_rows += modality[size_t(k)] != Modality::Text;
          tokens.resize(size_t(to)), modality.resize(size_t(to)), media.resize(size_t(image_rows * H));
        } else {  // calls that must fail: a token outside the vocabulary, padding after the start
          PromptBatch bad = batch_of({SeqBuilder(c, rng()).no_bos().text(2)}, 0);
          if (rng() % 2) bad.tokens[1] = V + 3;
          else bad.attention_mask[0] = 0;
          EXPECT_THROW(s.append(bad), InputError);
          EXPECT_THROW(s.decode({-1}), Error);  // out of the vocabulary, or no room left
        }
        ASSERT_EQ(s.length(), int64_t(tokens.size())) << plan_name(plan) << " seed " << seed << " op " << op;
      }
      grown_seeds += grown_by_blocks;
    }
    if (plan == Plan::Split || plan == Plan::Unified) {
      EXPECT_GE(grown_seeds, 2) << plan_name(plan);
    }
  }
}

// Nothing grows per generated token but the KV cache and the token lists:
// logits of past steps are kept only when asked for.
TEST(StepGenerator, KeepsNoLogitsUnlessAsked) {
  const Model& m = test::tiny_model("tiny-gemma3");
  Session s(m, 1, options_for(Plan::Split, 1));
  SessionSource src(s);
  GenerationOptions go;
  go.keep_prompt_logits = go.keep_step_logits = false;
  Generator g(src, m.config(), go);
  g.run_turn({batch_of({SeqBuilder(m.config(), 90).text(5)}, 0), 40});
  EXPECT_TRUE(g.result().prompt_logits.empty());
  EXPECT_TRUE(g.result().step_logits.empty());
  EXPECT_GT(g.result().steps, 0);
}
