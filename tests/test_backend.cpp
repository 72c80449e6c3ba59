// The backend seam (backend/decoder_backend.h) driven directly, without a
// session: every backend this build has runs one call of several sequences
// (left padding, a media block) and a decode step after it, under every
// plan's KV layout, and gives the oracle's logits. Every session test runs
// on a chosen backend too: SPLITDEC_BACKEND=<name> ctest.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "backend/decoder_backend.h"
#include "core/error.h"
#include "model/reference_forward.h"
#include "pipeline/plan.h"
#include "pipeline/session.h"
#include "test_prompts.h"
#include "test_support.h"

using namespace splitdec;
using test::SeqBuilder;
using test::batch_of;

namespace {

constexpr float kLogitTolerance = 2e-4f;  // fp32, summation order only (as test_session)

// Each sequence of `p` as one call's sequence: slot b, empty before the call.
std::vector<BackendSequence> call_sequences(const PromptBatch& p) {
  std::vector<BackendSequence> out;
  for (int b = 0; b < p.batch; ++b) {
    BackendSequence s{b, 0, 0, p.sequence_block_ids(b)};
    while (p.attention_mask[size_t(b) * size_t(p.seq) + size_t(s.start)] == 0) ++s.start;
    int base = -1;
    for (int id : s.blocks)
      if (id >= 0 && (base < 0 || id < base)) base = id;
    for (int& id : s.blocks) id = id < 0 ? -1 : id - base;
    out.push_back(std::move(s));
  }
  return out;
}

// Worst difference over the real (non-padding) rows of [batch, seq, vocab] logits.
float worst_real_row(const std::vector<float>& got, const std::vector<float>& want, const PromptBatch& p, int vocab) {
  float worst = 0;
  for (int64_t r = 0; r < p.rows(); ++r)
    if (p.attention_mask[size_t(r)])
      for (int v = 0; v < vocab; ++v)
        worst = std::max(worst, std::fabs(got[size_t(r) * size_t(vocab) + size_t(v)] - want[size_t(r) * size_t(vocab) + size_t(v)]));
  return worst;
}

}  // namespace

TEST(Backend, EveryBackendRunsACallOfSeveralSequencesAsTheOracle) {
  for (const char* preset : {"tiny-gemma3", "tiny-gemma4"}) {
    const Model& m = test::tiny_model(preset);
    const ModelConfig& c = m.config();
    SeqBuilder a(c, 3), b(c, 4);
    a.text(2).media(Modality::Image, 9).text(3);
    b.text(4);
    const PromptBatch prompt = batch_of({a, b}, c.pad_token_id);
    const std::vector<float> want = reference_logits(m, prompt, c.default_policy);
    const PromptBatch step = PromptBatch::text_column({41, 57});
    const std::vector<float> want_step = reference_logits(m, prompt.concat(step), c.default_policy);
    for (const std::string& name : backend_names())
      for (const PlanSpec& plan : plan_table()) {
        const std::string what = std::string(preset) + ", backend " + name + ", plan " + plan.name;
        const KvStoreShape shape{2, 64, prompt.seq, DType::F32};
        auto backend = make_decoder_backend(parse_backend(name), m, c.default_policy, plan.layout, plan.make_store(c, shape));
        EXPECT_EQ(backend->name(), name);
        // The whole prompt in one call: the media chunk's path, every row's logits.
        BackendCall call;
        call.path = plan.route(true, false);
        call.rows = prompt.seq;
        call.sequences = call_sequences(prompt);
        call.input = &prompt;
        const std::vector<int64_t> positions = prompt.rope_positions();
        call.positions = positions.data();
        call.logits = BackendCall::Logits::AllRows;
        const std::vector<float> got = backend->forward(call);
        ASSERT_EQ(got.size(), want.size()) << what;
        EXPECT_LE(worst_real_row(got, want, prompt, c.vocab_size), kLogitTolerance) << what;

        // One decode step on both slots: the last row's logits of each.
        BackendCall decode;
        decode.path = plan.route(false, true);
        decode.rows = 1;
        decode.decode = true;
        for (BackendSequence s : call.sequences) {
          s.first = prompt.seq;
          s.blocks = {-1};
          decode.sequences.push_back(s);
        }
        decode.input = &step;
        std::vector<int64_t> step_positions;
        for (int q = 0; q < 2; ++q) step_positions.push_back(positions[size_t(q + 1) * size_t(prompt.seq) - 1] + 1);
        decode.positions = step_positions.data();
        const std::vector<float> got_step = backend->forward(decode);
        ASSERT_EQ(got_step.size(), size_t(2) * size_t(c.vocab_size)) << what;
        float worst = 0;
        for (int q = 0; q < 2; ++q)
          for (int v = 0; v < c.vocab_size; ++v)
            worst = std::max(worst, std::fabs(got_step[size_t(q) * size_t(c.vocab_size) + size_t(v)] -
                                              want_step[(size_t(q) * size_t(prompt.seq + 1) + size_t(prompt.seq)) * size_t(c.vocab_size) + size_t(v)]));
        EXPECT_LE(worst, kLogitTolerance) << what << " (decode step)";
        EXPECT_GT(backend->memory().full_layers + backend->memory().sliding_layers + (plan.plan == Plan::Single), 0) << what;
      }
  }
}

TEST(Backend, AnUnknownBackendIsRefusedListingTheValidOnes) {
  try {
    parse_backend("cuda-someday");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda-someday"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
  // The environment's choice is read when a session names none, and a wrong
  // one is an error naming the variable (each test runs in its own process).
  ::setenv("SPLITDEC_BACKEND", "nonesuch", 1);
  try {
    Session s(test::tiny_model("tiny-gemma3"), 1, SessionOptions{});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("SPLITDEC_BACKEND"), std::string::npos) << e.what();
  }
  // A session that names its backend does not read the variable.
  SessionOptions named;
  named.backend = BackendKind::Cpu;
  Session s(test::tiny_model("tiny-gemma3"), 1, named);
  EXPECT_STREQ(s.backend().name(), "cpu");
  ::unsetenv("SPLITDEC_BACKEND");
  EXPECT_EQ(default_backend(), BackendKind::Cpu);
}
