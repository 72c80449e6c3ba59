// Sessions under every plan agree with the reference forward pass, for both
// tiny models and every mask policy; the router's decisions are visible in
// the trace; errors leave the session usable.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/machine.h"
#include "generate/generator.h"
#include "generate/reference_source.h"
#include "kv/kv_cache.h"
#include "model/reference_forward.h"
#include "pipeline/session.h"
#include "test_prompts.h"
#include "test_support.h"

using namespace splitdec;
using test::SeqBuilder;
using test::batch_of;

namespace {

// Logits of every plan agree with the reference within this (fp32, logits of
// order 1..30; differences come from summation order only).
constexpr float kLogitTolerance = 2e-4f;

struct NamedCase {
  std::string name;
  std::vector<Turn> turns;
};

std::vector<NamedCase> cases(const ModelConfig& c) {
  std::vector<NamedCase> out;
  auto one = [&](SeqBuilder s, int max_new = 5) { return std::vector<Turn>{{batch_of({s}, c.pad_token_id), max_new}}; };
  out.push_back({"no image", one(SeqBuilder(c, 1).text(14))});
  out.push_back({"one image longer than the window", one(SeqBuilder(c, 2).text(3).media(Modality::Image, 16).text(4))});
  out.push_back({"two images", one(SeqBuilder(c, 3).media(Modality::Image, 16).text(2).media(Modality::Image, 5).text(3))});
  out.push_back({"video then image, between markers", one(SeqBuilder(c, 4).text(2).media(Modality::Video, 6).media(Modality::Image, 7).text(2))});
  out.push_back({"image run then video run, adjacent: one block",
                 one(SeqBuilder(c, 10).text(2).media_runs({{Modality::Image, 5}, {Modality::Video, 6}}).text(2))});
  out.push_back({"audio is causal", one(SeqBuilder(c, 5).text(2).media(Modality::Audio, 9).text(3))});
  {
    SeqBuilder a(c, 6), b(c, 7);
    a.text(2).media(Modality::Image, 16).text(3);
    b.text(1).media(Modality::Image, 4).text(2);
    out.push_back({"left padding in a batch", {{batch_of({a, b}, c.pad_token_id), 5}}});
  }
  {
    SeqBuilder t1(c, 8), t2(c, 9);
    t1.text(6);
    t2.no_bos().text(2).media(Modality::Image, 12).text(3);
    out.push_back({"multi-turn, image in the second turn",
                   {{batch_of({t1}, c.pad_token_id), 4}, {batch_of({t2}, c.pad_token_id), 5}}});
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float worst = 0;
  for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::fabs(got[k] - want[k]));
  EXPECT_LE(worst, kLogitTolerance) << what;
}

class PlanAgreement : public ::testing::TestWithParam<std::tuple<std::string, MaskPolicy>> {};

}  // namespace

TEST_P(PlanAgreement, EveryPlanMatchesTheReference) {
  const auto& [preset, policy] = GetParam();
  const Model& m = test::tiny_model(preset);
  for (const NamedCase& nc : cases(m.config())) {
    const GenerationResult want = reference_generate(m, nc.turns, policy);
    for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified})
      for (int chunk : {3, 5, 64}) {
        SessionOptions o;
        o.plan = plan;
        o.chunk = chunk;
        o.capacity = 80;
        o.policy = policy;
        Session s(m, nc.turns[0].prompt.batch, o);
        const GenerationResult got = generate_greedy(s, nc.turns);
        const std::string what = nc.name + ", plan " + plan_name(plan) + ", chunk " + std::to_string(chunk);
        EXPECT_EQ(got.tokens, want.tokens) << what;
        expect_close(got.prompt_logits, want.prompt_logits, what + " (prompt logits)");
        expect_close(got.step_logits, want.step_logits, what + " (step logits)");
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, PlanAgreement,
    ::testing::Combine(::testing::Values("tiny-gemma3", "tiny-gemma4", "tiny-gemma4-ple", "tiny-gemma4-moe"),
                       ::testing::ValuesIn(all_mask_policies())),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_" + mask_policy_name(std::get<1>(info.param));
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

namespace {
PromptBatch image_prompt(const ModelConfig& c, int n_image, uint32_t seed = 11) {
  SeqBuilder s(c, seed);
  s.text(3).media(Modality::Image, n_image).text(3);
  return batch_of({s}, c.pad_token_id);
}
}  // namespace

TEST(Router, SplitSendsOnlyMediaChunksToTheMaskedPathAndNeverAllocatesKv) {
  const Model& m = test::tiny_model("tiny-gemma4");
  SessionOptions o;
  o.plan = Plan::Split;
  o.chunk = 4;
  o.capacity = 64;
  Session s(m, 1, o);
  generate_greedy(s, {{image_prompt(m.config(), 16), 6}});
  int masked = 0, decode = 0;
  for (const TraceEntry& e : s.trace()) {
    EXPECT_EQ(e.kv_bytes_allocated, 0);
    EXPECT_EQ(e.kv_bytes_copied, 0);
    if (e.kind == TraceEntry::Decode) {
      ++decode;
      EXPECT_EQ(e.path, AttentionPath::Gqa);
      EXPECT_EQ(e.end - e.begin, 1);
    }
    if (e.path == AttentionPath::Masked) {
      ++masked;
      EXPECT_EQ(e.end - e.begin, 16);  // the block opens its own chunk and grows it past the chunk size
    }
  }
  EXPECT_EQ(masked, 1);
  EXPECT_EQ(decode, 5);
}

TEST(Router, CausalPolicyAndTextPromptsNeverTakeTheMaskedPath) {
  const Model& m = test::tiny_model("tiny-gemma3");
  for (MaskPolicy policy : {MaskPolicy::Causal, MaskPolicy::Gemma3}) {
    SessionOptions o;
    o.chunk = 4;
    o.capacity = 64;
    o.policy = policy;
    Session s(m, 1, o);
    const PromptBatch p = policy == MaskPolicy::Causal ? image_prompt(m.config(), 16) : batch_of({SeqBuilder(m.config(), 3).text(20)}, 0);
    generate_greedy(s, {{p, 3}});
    for (const TraceEntry& e : s.trace()) EXPECT_EQ(e.path, AttentionPath::Gqa);
  }
}

TEST(Router, OtherPlansShowTheirCosts) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const PromptBatch p = image_prompt(m.config(), 16);
  auto run = [&](Plan plan) {
    SessionOptions o;
    o.plan = plan;
    o.chunk = 64;
    o.capacity = 64;
    Session s(m, 1, o);
    generate_greedy(s, {{p, 4}});
    return s.trace();
  };
  for (const TraceEntry& e : run(Plan::Single)) {
    EXPECT_EQ(e.path, AttentionPath::DenseBias);
    EXPECT_GT(e.kv_bytes_allocated, 0);  // present = concat(past, new), every step
  }
  for (const TraceEntry& e : run(Plan::Unified)) {
    EXPECT_EQ(e.path, AttentionPath::Unified);
    EXPECT_EQ(e.kv_bytes_allocated, 0);
  }
  const auto copy = run(Plan::SplitCopy);
  ASSERT_EQ(copy.size(), 4u);
  EXPECT_EQ(copy[0].path, AttentionPath::Masked);
  EXPECT_EQ(copy[1].kind, TraceEntry::Decode);
  EXPECT_GT(copy[1].kv_bytes_copied, 0);  // the handoff, on the first decode step
  EXPECT_EQ(copy[2].kv_bytes_copied, 0);
  EXPECT_EQ(copy[3].kv_bytes_copied, 0);
}

// The plan table: one row per plan, names round-trip, and each row's router
// and layouts are the plan's contract (split: only media prefill chunks
// masked, one shared buffer; split-copy: every prefill chunk through its
// own present; single: dense bias on a present every call; unified: one
// kernel, one buffer); only the concat store reserves nothing up front.
TEST(Router, ThePlanTableHoldsEachPlansRouteLayoutAndStore) {
  const Model& m = test::tiny_model("tiny-gemma3");
  const KvStoreShape shape{2, 64, 16, DType::F32};
  ASSERT_EQ(plan_table().size(), 4u);
  for (const PlanSpec& spec : plan_table()) {
    SCOPED_TRACE(spec.name);
    EXPECT_EQ(session_plan(parse_execution_plan(spec.name)), spec.plan);
    EXPECT_STREQ(plan_name(spec.plan), spec.name);
    EXPECT_EQ(&plan_spec(spec.plan), &spec);
    const auto store = spec.make_store(m.config(), shape);
    ASSERT_NE(store, nullptr);
    const KvMemory reserved = spec.reserved(m.config(), shape);
    if (spec.plan == Plan::Single) {
      EXPECT_EQ(reserved.full_bytes + reserved.sliding_bytes, 0u);
    } else {
      EXPECT_EQ(reserved.full_bytes, KvCache::plan(m.config(), 2, 64, 16).full_bytes);
      EXPECT_EQ(store->memory().full_bytes, reserved.full_bytes);
    }
    for (bool media : {false, true}) {
      const AttentionPath prefill = spec.route(media, false), decode = spec.route(false, true);
      switch (spec.plan) {
        case Plan::Single:
          EXPECT_EQ(prefill, AttentionPath::DenseBias);
          EXPECT_EQ(decode, AttentionPath::DenseBias);
          EXPECT_EQ(spec.layout(prefill), KvLayout::Present);
          break;
        case Plan::Split:
          EXPECT_EQ(prefill, media ? AttentionPath::Masked : AttentionPath::Gqa);
          EXPECT_EQ(decode, AttentionPath::Gqa);
          EXPECT_EQ(spec.layout(prefill), KvLayout::Shared);
          break;
        case Plan::SplitCopy:
          EXPECT_EQ(prefill, AttentionPath::Masked);
          EXPECT_EQ(decode, AttentionPath::Gqa);
          EXPECT_EQ(spec.layout(prefill), KvLayout::Present);
          EXPECT_EQ(spec.layout(decode), KvLayout::Shared);
          break;
        case Plan::Unified:
          EXPECT_EQ(prefill, AttentionPath::Unified);
          EXPECT_EQ(decode, AttentionPath::Unified);
          EXPECT_EQ(spec.layout(prefill), KvLayout::Shared);
          break;
      }
    }
  }
  try {
    parse_execution_plan("fast");
    ADD_FAILURE() << "accepted an unknown plan";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("valid: single, split, split-copy, unified"), std::string::npos) << e.what();
  }
}

TEST(SessionErrors, CapacityExhaustedThenUsable) {
  const Model& m = test::tiny_model("tiny-gemma3");
  const PromptBatch p = image_prompt(m.config(), 4);
  SessionOptions o;
  o.capacity = p.seq + 2;
  Session s(m, 1, o);
  s.append(p);
  s.decode({30});
  s.decode({31});
  try {
    s.decode({32});
    FAIL();
  } catch (const CapacityError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(p.seq + 2)), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.length(), p.seq + 2);
  s.rewind(p.seq + 1);
  EXPECT_NO_THROW(s.decode({32}));
}

TEST(SessionErrors, BlockThatCannotFitThenUsable) {
  const Model& m = test::tiny_model("tiny-gemma4");
  SessionOptions o;
  o.capacity = 20;
  Session s(m, 1, o);
  s.append(batch_of({SeqBuilder(m.config(), 1).text(8)}, 0));
  SeqBuilder more(m.config(), 2);
  more.no_bos().media(Modality::Image, 16);
  try {
    s.append(batch_of({more}, 0));
    FAIL();
  } catch (const CapacityError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("18 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("capacity of 20"), std::string::npos) << msg;
  }
  EXPECT_EQ(s.length(), 9);
  EXPECT_NO_THROW(s.decode({40}));
}

// Only memory can refuse a long block: a growth the machine cannot hold is
// refused before anything runs (nothing allocated, the session unchanged),
// and the message names the flags that help.
TEST(RingSizing, AGrowthLargerThanTheMachineIsRefusedNamingFlags) {
  if (physical_memory_bytes() == 0) GTEST_SKIP() << "this machine does not report its memory";
  const Model& m = test::tiny_model("tiny-gemma4");
  ModelConfig wide = m.config();  // one sliding layer with 8 MiB of K/V per position
  wide.num_layers = 1;
  wide.layers.resize(1);
  wide.layers[0].num_kv_heads = wide.num_heads = 64;
  wide.layers[0].head_dim = 16384;
  const Model no_weights(wide, ModelWeights{});
  SessionOptions o;
  o.chunk = 1;
  o.max_chunk = 1;  // rings of window + 1 positions: 72 MiB
  o.capacity = int64_t(1) << 30;
  Session s(no_weights, 1, o);
  const int64_t rows = int64_t(physical_memory_bytes() / (size_t(8) << 20)) + 2;
  ASSERT_LT(rows, int64_t(1) << 30);
  PromptBatch p;
  p.batch = 1, p.seq = int(rows);
  p.tokens.assign(size_t(rows), 30), p.attention_mask.assign(size_t(rows), 1);
  p.modality.assign(size_t(rows), Modality::Image);
  try {
    s.check_append({0}, p);
    FAIL() << "a ring larger than the machine was accepted";
  } catch (const CapacityError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--max-length"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--kv-dtype"), std::string::npos) << msg;
    EXPECT_NE(msg.find("chunk of " + std::to_string(rows)), std::string::npos) << msg;
  }
  EXPECT_EQ(s.memory().sliding_slots, 9);
}

// A media block longer than the rings were sized for grows them once, at
// its prefill: the trace shows the allocation on that chunk only, decode
// steps stay allocation-free, and the logits are the reference's.
TEST(RingSizing, ABlockLongerThanTheRingsGrowsThemOnce) {
  const Model& m = test::tiny_model("tiny-gemma4");  // window 8
  for (Plan plan : {Plan::Split, Plan::SplitCopy, Plan::Unified}) {
    SessionOptions o;
    o.plan = plan;
    o.capacity = 64;
    o.chunk = 4;
    o.max_chunk = 8;  // rings of 16 positions
    Session s(m, 1, o);
    EXPECT_EQ(s.memory().sliding_slots, 16);
    const std::vector<Turn> turns = {{image_prompt(m.config(), 20), 4}, {image_prompt(m.config(), 12, 13), 3}};
    const GenerationResult got = generate_greedy(s, turns);
    const GenerationResult want = reference_generate(m, turns, s.policy());
    EXPECT_EQ(got.tokens, want.tokens) << plan_name(plan);
    expect_close(got.prompt_logits, want.prompt_logits, std::string(plan_name(plan)) + " prompt logits");
    expect_close(got.step_logits, want.step_logits, std::string(plan_name(plan)) + " step logits");
    // split-copy's prefill reads its present, which holds everything: its rings never grow.
    EXPECT_EQ(s.memory().sliding_slots, plan == Plan::SplitCopy ? 16 : 8 + 20) << plan_name(plan);
    int grew = 0;
    for (const TraceEntry& e : s.trace()) {
      if (e.kind == TraceEntry::Decode) {
        EXPECT_EQ(e.kv_bytes_allocated, 0) << plan_name(plan);
      }
      if (plan != Plan::SplitCopy && e.kv_bytes_allocated > 0) {  // split-copy's present allocates every prefill
        ++grew;
        EXPECT_EQ(e.end - e.begin, 20) << plan_name(plan);  // the chunk holding the long block
        EXPECT_EQ(e.kind, TraceEntry::Prefill) << plan_name(plan);
      }
    }
    if (plan != Plan::SplitCopy) {
      EXPECT_EQ(grew, 1) << plan_name(plan);
    }
  }
}

// Growing the rings for one sequence's long image keeps what every other
// sequence's wrapped ring held: that sequence decodes on as if nothing had
// happened, a rewind to what its small ring had dropped is still refused,
// and a rewind the grown ring covers gives the oracle's logits.
TEST(RingSizing, GrowingKeepsWhatEverySequenceHeld) {
  const Model& m = test::tiny_model("tiny-gemma4");  // window 8
  const ModelConfig& c = m.config();
  const int V = c.vocab_size;
  for (DType storage : {DType::F32, DType::BF16, DType::I8})
  for (Plan plan : {Plan::Split, Plan::Unified}) {
    SessionOptions o;
    o.plan = plan;
    o.chunk = 4;
    o.max_chunk = 4;  // rings of 12 positions
    o.capacity = 96;
    o.max_sequences = 2;
    o.kv_dtype = storage;
    Session s(m, 0, o), alone(m, 1, o);
    const int a = s.open_sequence(), b = s.open_sequence();
    const PromptBatch prompt = batch_of({SeqBuilder(c, 91).text(10)}, 0);
    std::vector<int> history(prompt.tokens);
    s.append({a}, prompt);
    alone.append(prompt);
    for (int k = 0; k < 20; ++k) {  // A's rings wrap (31 positions > 12)
      const int t = 20 + (k * 13) % 400;
      history.push_back(t);
      expect_close(s.decode({a}, {t}), alone.decode({t}), "before the growth");
    }
    s.append({b}, image_prompt(c, 30, 92));  // B's image grows the rings of both slots
    EXPECT_EQ(s.memory().sliding_slots, 8 + 30);
    for (int k = 0; k < 5; ++k) {
      const int t = 30 + k;
      history.push_back(t);
      expect_close(s.decode({a}, {t}), alone.decode({t}), std::string(plan_name(plan)) + " after the growth");
    }
    EXPECT_THROW(s.rewind(a, 20), CapacityError);  // the 12-slot ring had dropped position 13
    ASSERT_NO_THROW(s.rewind(a, 30));              // needs positions 23.., held since before the growth
    history.resize(30);
    history.push_back(77);
    PromptBatch whole = PromptBatch::text_column(history);
    whole.batch = 1, whole.seq = int(history.size());
    const std::vector<float> want = reference_logits(m, whole, s.policy());
    const std::vector<float> got = s.decode({a}, {77});
    if (storage == DType::F32) expect_close(got, std::vector<float>(want.end() - V, want.end()), std::string(plan_name(plan)) + " after a rewind");
  }
}

// Staggered images in a batch join one chunk longer than either image: the
// rings grow to that chunk, and each sequence still gets the reference's logits.
TEST(RingSizing, StaggeredImagesOfABatchJoinOneLongChunk) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const ModelConfig& c = m.config();
  SeqBuilder a(c, 51), b(c, 52);
  a.text(2).media(Modality::Image, 14).text(12);
  b.text(9).media(Modality::Image, 14).text(5);
  const std::vector<Turn> turns = {{batch_of({a, b}, c.pad_token_id), 4}};
  const GenerationResult want = reference_generate(m, turns, c.default_policy);
  for (Plan plan : {Plan::Split, Plan::Unified}) {
    SessionOptions o;
    o.plan = plan;
    o.capacity = 64;
    o.chunk = 4;
    o.max_chunk = 4;
    Session s(m, 2, o);
    const GenerationResult got = generate_greedy(s, turns);
    EXPECT_EQ(got.tokens, want.tokens) << plan_name(plan);
    expect_close(got.prompt_logits, want.prompt_logits, std::string(plan_name(plan)) + " prompt logits");
    expect_close(got.step_logits, want.step_logits, std::string(plan_name(plan)) + " step logits");
    int longest = 0;
    for (const TraceEntry& e : s.trace()) longest = std::max(longest, int(e.end - e.begin));
    EXPECT_GT(longest, 16);  // both blocks in one chunk
    EXPECT_EQ(s.memory().sliding_slots, 8 + longest) << plan_name(plan);
  }
}

// The case from the verification report: a 1200-token image on tiny-gemma4
// at the default chunk settings (rings first sized for 256 + 2 x 16), where
// the rings still wrap after the block (capacity above window + block).
TEST(RingSizing, A1200TokenImageRunsInEveryPlanAndMatchesTheReference) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const std::vector<Turn> turns = {{image_prompt(m.config(), 1200, 17), 3}};
  for (MaskPolicy policy : {m.config().default_policy, MaskPolicy::LegacyWindow}) {
    const GenerationResult want = reference_generate(m, turns, policy);
    for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified}) {
      SessionOptions o;
      o.plan = plan;
      o.capacity = 1300;
      o.policy = policy;
      Session s(m, 1, o);
      const GenerationResult got = generate_greedy(s, turns);
      const std::string what = std::string(plan_name(plan)) + " " + mask_policy_name(policy);
      EXPECT_EQ(got.tokens, want.tokens) << what;
      expect_close(got.prompt_logits, want.prompt_logits, what + " prompt logits");
      expect_close(got.step_logits, want.step_logits, what + " step logits");
      if (plan == Plan::Split || plan == Plan::Unified) {
        EXPECT_EQ(s.memory().sliding_slots, 8 + 1200) << what;
      }
    }
  }
}

TEST(SessionErrors, ChunkSizeZeroAndBadRewinds) {
  const Model& m = test::tiny_model("tiny-gemma4");
  SessionOptions o;
  o.chunk = 0;
  EXPECT_THROW(Session(m, 1, o), InputError);
  o.chunk = 4;
  o.capacity = 64;
  Session s(m, 1, o);
  const PromptBatch p = image_prompt(m.config(), 4);
  s.append(p);
  EXPECT_THROW(s.rewind(-1), InputError);
  EXPECT_THROW(s.rewind(p.seq + 1), InputError);
  EXPECT_THROW(s.decode({1, 2}), InputError);
  EXPECT_THROW(s.decode({m.config().vocab_size}), InputError);
  PromptBatch padded = batch_of({SeqBuilder(m.config(), 3).text(2)}, 0);
  padded.attention_mask[0] = 0;
  EXPECT_THROW(s.append(padded), InputError);  // padding after the first prompt
  EXPECT_EQ(s.length(), p.seq);
  EXPECT_NO_THROW(s.decode({40}));
}

TEST(SessionRewind, RewindThenRedecodeGivesTheSameLogits) {
  const Model& m = test::tiny_model("tiny-gemma4");
  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified}) {
    SessionOptions o;
    o.plan = plan;
    o.chunk = 5;
    o.capacity = 64;
    Session s(m, 1, o);
    const PromptBatch p = image_prompt(m.config(), 16);
    s.append(p);
    const auto first = s.decode({50});
    s.decode({51});
    s.decode({52});
    s.rewind(p.seq);
    EXPECT_EQ(s.decode({50}), first) << plan_name(plan);
  }
}

TEST(SessionRewind, SlidingRingThatDroppedPositionsIsAnError) {
  const Model& m = test::tiny_model("tiny-gemma4");  // window 8
  SessionOptions o;
  o.chunk = 4;
  o.max_chunk = 4;  // rings of 12 positions
  o.capacity = 64;
  Session s(m, 1, o);
  EXPECT_EQ(s.memory().sliding_slots, 12);
  s.append(batch_of({SeqBuilder(m.config(), 1).text(39)}, 0));
  try {
    s.rewind(20);
    FAIL();
  } catch (const CapacityError& e) {
    EXPECT_NE(std::string(e.what()).find("sliding layer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.length(), 40);
  EXPECT_NO_THROW(s.rewind(36));  // still inside every ring
  EXPECT_NO_THROW(s.decode({40}));
}

TEST(KvMemoryReport, FullLayersDominateALongGemma4Session) {
  const std::string dir = test::temp_dir("g4-12b");
  // Only the config is needed: the plan is computed, not allocated.
  nlohmann::json j = {{"model_type", "gemma4"},
                      {"text_config",
                       {{"hidden_size_per_layer_input", 0}, {"num_hidden_layers", 48}, {"num_attention_heads", 16},
                        {"num_key_value_heads", 8}, {"head_dim", 256}, {"global_head_dim", 512}, {"sliding_window", 1024}}}};
  const ModelConfig c = parse_model_config(j, "config.json");
  const KvMemory mem = KvCache::plan(c, 1, 131072, 512);
  EXPECT_EQ(mem.full_layers, 8);
  EXPECT_EQ(mem.sliding_layers, 40);
  EXPECT_EQ(mem.sliding_slots, 1024 + 512);
  EXPECT_GT(mem.full_bytes, 20 * mem.sliding_bytes);
  // Rings at the default chunk (256 + 2 x 280 soft tokens), then grown for one
  // 1120-token image (Gemma-4's largest budget): 640 KiB per ring slot (f32).
  const size_t per_slot = size_t(40) * 2 * 8 * 256 * 4;
  EXPECT_EQ(KvCache::plan(c, 1, 131072, 256 + 2 * 280).sliding_bytes, per_slot * (1024 + 816));
  EXPECT_EQ(KvCache::plan(c, 1, 131072, 1120).sliding_bytes, per_slot * (1024 + 1120));
  // The tiny model: KV-shared layers own no buffer.
  const Model& m = test::tiny_model("tiny-gemma4");
  SessionOptions o;
  o.capacity = 100;
  Session s(m, 2, o);
  EXPECT_EQ(s.memory().shared_layers, 2);
  EXPECT_EQ(s.memory().full_layers, 1);
  EXPECT_EQ(s.memory().full_bytes, size_t(2 * 2 * 1 * 100 * 32 * 4));
}

namespace {
// Resident bytes of this process now (/proc/self/statm); 0 where unreadable.
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  if (!(f >> pages >> resident)) return 0;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}
}  // namespace

// A cache sized for a long context costs resident memory only where it is
// written: its buffers start as the kernel's zero pages, not memset.
TEST(KvStorage, TheBufferIsZerosAndResidentOnlyWhereWritten) {
  const Model& m = test::tiny_model("tiny-gemma3");
  SessionOptions o;
  o.capacity = 1 << 20;  // full layers: [1 kv head, 2^20 slots, 32] f32 x 2 per layer
  o.plan = Plan::Split;
  const size_t before = resident_bytes();
  Session s(m, 1, o);
  ASSERT_GT(s.memory().full_bytes, size_t(200) << 20);
  const PromptBatch p = image_prompt(m.config(), 16);
  // The logits equal a small session's: what was never written reads as zero.
  SessionOptions small = o;
  small.capacity = 64;
  Session t(m, 1, small);
  EXPECT_EQ(s.append(p), t.append(p));
  EXPECT_EQ(s.decode({33}), t.decode({33}));
#if !defined(__SANITIZE_ADDRESS__)  // ASan's heap commits what it hands out
  if (before > 0) {
    EXPECT_LT(resident_bytes() - before, s.memory().full_bytes / 8) << "the whole capacity was made resident";
  }
#endif
}

TEST(KvStorage, SixteenBitAndQ8CachesShrinkMemoryAndStayClose) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const PromptBatch p = image_prompt(m.config(), 16);
  SessionOptions o;
  o.capacity = 64;
  o.chunk = 5;
  Session f32(m, 1, o);
  const GenerationResult want = generate_greedy(f32, {{p, 6}});
  for (DType storage : {DType::BF16, DType::F16, DType::I8})
  for (Plan plan : {Plan::Split, Plan::SplitCopy, Plan::Unified, Plan::Single}) {
    o.plan = plan;
    o.kv_dtype = storage;
    Session low(m, 1, o);
    if (plan != Plan::Single) {  // the single plan pre-allocates nothing
      if (storage == DType::I8) {  // int8 values and one f32 scale per row
        EXPECT_LT(low.memory().full_bytes * 3, f32.memory().full_bytes);
        EXPECT_EQ(low.memory().full_bytes, KvCache::plan(m.config(), 1, 64, o.max_chunk, DType::I8).full_bytes);
      } else {
        EXPECT_EQ(low.memory().full_bytes * 2, f32.memory().full_bytes);
        EXPECT_EQ(low.memory().sliding_bytes * 2, f32.memory().sliding_bytes);
      }
    }
    const GenerationResult got = generate_greedy(low, {{p, 6}});
    // bf16 keeps 8 bits of mantissa, q8 7 bits of each row's range: logits
    // move by ~0.05 and ~0.15, not more, over the steps that chose the same
    // token (a close call may go the other way: q8 did at step 3 here).
    const size_t V = size_t(m.config().vocab_size);
    float worst = 0;
    size_t same = 0;
    for (; same < got.tokens[0].size() && got.tokens[0][same] == want.tokens[0][same]; ++same)
      for (size_t k = same * V; k < (same + 1) * V; ++k) worst = std::max(worst, std::fabs(got.step_logits[k] - want.step_logits[k]));
    EXPECT_GE(same, 3u) << plan_name(plan) << " " << dtype_name(storage);
    EXPECT_LT(worst, storage == DType::I8 ? 0.3f : 0.1f) << plan_name(plan) << " " << dtype_name(storage);
    EXPECT_GT(worst, 0.f) << plan_name(plan);  // it really stored fewer bits
  }
}

// With 16-bit or q8 KV every plan still gives the same tokens: the stores
// that keep f32 (single's present, split-copy's prefill present) keep each
// row as the shared buffer hands it back (kv/kv_rows.h).
TEST(KvStorage, EveryPlanAgreesUnderLowPrecisionKv) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const PromptBatch p = image_prompt(m.config(), 16);
  for (DType storage : {DType::BF16, DType::I8}) {
    std::vector<GenerationResult> results;
    for (Plan plan : {Plan::Split, Plan::Single, Plan::SplitCopy, Plan::Unified}) {
      SessionOptions o;
      o.capacity = 64;
      o.chunk = 5;
      o.plan = plan;
      o.kv_dtype = storage;
      Session s(m, 1, o);
      results.push_back(generate_greedy(s, {{p, 8}}));
    }
    for (size_t i = 1; i < results.size(); ++i) {
      EXPECT_EQ(results[i].tokens, results[0].tokens) << dtype_name(storage) << " plan " << i;
      ASSERT_EQ(results[i].step_logits.size(), results[0].step_logits.size());
      float worst = 0;
      for (size_t k = 0; k < results[i].step_logits.size(); ++k)
        worst = std::max(worst, std::fabs(results[i].step_logits[k] - results[0].step_logits[k]));
      EXPECT_LT(worst, 2e-3f) << dtype_name(storage) << " plan " << i;
    }
  }
}

// A rewind under any plan either refuses (the window's keys are gone) or
// gives exactly what a session that never went past the new end gives.
// split-copy keeps a second copy in its prefill present, so it may reach
// further back than split - but never with positions a ring had dropped.
TEST(SessionRewind, AfterRingsWrapEveryPlanRefusesOrMatchesAFreshSession) {
  const Model& m = test::tiny_model("tiny-gemma4");  // window 8
  const PromptBatch prompt = batch_of({SeqBuilder(m.config(), 61).text(29)}, 0);  // 30 tokens
  std::vector<int> tail;
  for (int k = 0; k < 40; ++k) tail.push_back(20 + (k * 7) % 300);
  auto options = [](Plan plan) {
    SessionOptions o;
    o.plan = plan;
    o.chunk = 4;
    o.max_chunk = 4;  // rings of 12 positions
    o.capacity = 96;
    return o;
  };
  // Fresh: the prompt, then the tail fed up to position `end`, then one more step.
  auto fresh = [&](Plan plan, int64_t end) {
    Session s(m, 1, options(plan));
    s.append(prompt);
    for (int64_t p = prompt.seq; p < end; ++p) s.decode({tail[size_t(p - prompt.seq)]});
    return s.decode({tail[size_t(end - prompt.seq)]});
  };
  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified})
    for (int second_prompt : {0, 1})
      for (int64_t back : {int64_t(31), int64_t(36), int64_t(45)}) {
        Session s(m, 1, options(plan));
        s.append(prompt);
        for (int k = 0; k < 20; ++k) s.decode({tail[size_t(k)]});
        if (second_prompt) s.append(batch_of({SeqBuilder(m.config(), 62).no_bos().text(2)}, 0));
        try {
          s.rewind(back);
        } catch (const CapacityError&) {
          EXPECT_NE(plan, Plan::Single) << "the concat store keeps everything";
          continue;
        }
        EXPECT_EQ(s.decode({tail[size_t(back - prompt.seq)]}), fresh(plan, back)) << plan_name(plan) << " back to " << back;
      }
}

TEST(SessionErrors, SizesAreCheckedBeforeAllocating) {
  const Model& m = test::tiny_model("tiny-gemma4");
  SessionOptions o;
  o.capacity = int64_t(1) << 40;
  EXPECT_THROW(Session(m, 1, o), CapacityError);  // not std::bad_alloc
  // chunk + 2 x mm_tokens_per_image would overflow an int (UB before).
  ModelConfig huge_images = m.config();
  huge_images.mm_tokens_per_image = 1 << 30;
  const Model no_weights(huge_images, ModelWeights{});
  EXPECT_THROW(Session(no_weights, 1, SessionOptions{}), ConfigError);
  o.capacity = int64_t(1) << 31;
  o.max_sequences = 4000;
  try {
    Session s(m, 1, o);
    FAIL() << "a KV cache larger than the machine was allocated";
  } catch (const CapacityError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-length"), std::string::npos) << e.what();
  }
}

// An image run directly followed by a video run is ONE media block, as in
// Hugging Face's Gemma-4 mask (`is_vision = image | video`): the reference
// and every plan treat it as explicit one-block ids would, one masked chunk
// holds both runs, and a rewind between them is refused. Runs in separate
// markers stay two blocks.
TEST(VisionBlocks, AdjacentImageAndVideoRunsAreOneBlockInEveryPlan) {
  const Model& m = test::tiny_model("tiny-gemma4");
  const ModelConfig& c = m.config();
  const MaskPolicy policy = c.default_policy;  // gemma4: bidirectional on sliding layers
  // 0 BOS, 1-2 text, 3 BOI, 4-9 image, 10-16 video, 17 EOI, 18-20 text.
  const PromptBatch joined =
      batch_of({SeqBuilder(c, 81).text(2).media_runs({{Modality::Image, 6}, {Modality::Video, 7}}).text(3)}, 0);
  ASSERT_EQ(joined.seq, 21);
  PromptBatch one = joined, two = joined;
  one.block_ids.assign(21, -1), two.block_ids.assign(21, -1);
  for (int k = 4; k < 17; ++k) one.block_ids[size_t(k)] = 0, two.block_ids[size_t(k)] = k < 10 ? 0 : 1;
  const std::vector<float> want = reference_logits(m, joined, policy);
  EXPECT_EQ(want, reference_logits(m, one, policy));
  const std::vector<float> split_blocks = reference_logits(m, two, policy);
  float apart = 0;
  for (size_t k = 0; k < want.size(); ++k) apart = std::max(apart, std::fabs(want[k] - split_blocks[k]));
  EXPECT_GT(apart, 1e-3f);  // the image rows see the video rows only as one block

  for (Plan plan : {Plan::Single, Plan::Split, Plan::SplitCopy, Plan::Unified}) {
    SessionOptions o;
    o.plan = plan;
    o.chunk = 5;
    o.capacity = 64;
    Session s(m, 1, o);
    expect_close(s.append(joined, true), want, std::string(plan_name(plan)) + " one block");
    if (plan == Plan::Split) {
      std::vector<std::pair<int64_t, int64_t>> masked;
      for (const TraceEntry& e : s.trace())
        if (e.path == AttentionPath::Masked) masked.push_back({e.begin, e.end});
      EXPECT_EQ(masked, (std::vector<std::pair<int64_t, int64_t>>{{4, 17}}));
    }
    try {
      s.rewind(10);  // between the image run and the video run
      FAIL() << plan_name(plan);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("media block at positions [4, 17)"), std::string::npos) << e.what();
    }
  }

  // Separate markers: two blocks, two masked chunks, a rewind between them is fine.
  const PromptBatch apart_runs =
      batch_of({SeqBuilder(c, 82).text(2).media(Modality::Image, 6).media(Modality::Video, 7).text(3)}, 0);
  SessionOptions o;
  o.chunk = 5;
  o.capacity = 64;
  Session s(m, 1, o);
  expect_close(s.append(apart_runs, true), reference_logits(m, apart_runs, policy), "two blocks");
  std::vector<std::pair<int64_t, int64_t>> masked;
  for (const TraceEntry& e : s.trace())
    if (e.path == AttentionPath::Masked) masked.push_back({e.begin, e.end});
  EXPECT_EQ(masked, (std::vector<std::pair<int64_t, int64_t>>{{4, 10}, {12, 19}}));
  EXPECT_NO_THROW(s.rewind(11));
}
