// Drives an exported splitdec package through ONNX Runtime as ONNX Runtime
// GenAI's decoder-pipeline runtime would (genai_pipeline.mjs), and compares
// its logits with splitdec's.
//
//   node run_package.mjs CASE.json
//
// CASE.json (written by tests/test_onnx_export.cpp): {package, tolerance,
// turns: [{input_ids, media, prompt_logits, decode_tokens, step_logits}]}:
// input_ids holds one row per sequence (rows of equal length), media the
// rows of every sequence in order, prompt_logits [batch, seq, vocab],
// decode_tokens one list of batch tokens per step and step_logits [steps,
// batch, vocab]. Each turn is one prompt run over its prompt (with
// everything before it as past), then one generation run per decode token.
// Media blocks come from the token ids inside the graphs; the only input a
// caller binds is media_embeds, and it is bound once: one buffer with room
// for the largest turn's rows, rewritten before each turn. Prints one JSON
// report on stdout.
//
// ONNX Runtime warnings go to stderr: TensorScatter warns there when it has
// to copy instead of writing in place (the C++ test checks for it).
//
// split: the KV buffers are allocated once, [1, kv_heads, max_length,
// head_dim], filled with a sentinel, and bound as both the past input and
// the present output of both stages. After every run the report checks that
// the runtime handed back our own buffers, that exactly the new slots were
// written, and that the sentinel beyond the current length survived.
// single: past and present are separate tensors; present becomes the next past.
import fs from 'node:fs';
import ort from 'onnxruntime-node';
import { GenaiPipeline } from './genai_pipeline.mjs';

const SENTINEL = -7777.25;

function argmax(a, off, n) {
  let best = 0;
  for (let k = 1; k < n; ++k) if (a[off + k] > a[off + best]) best = k;
  return best;
}

function maxDiff(got, want) {
  if (got.length !== want.length) return Infinity;
  let worst = 0;
  for (let k = 0; k < got.length; ++k) {
    const d = Math.abs(got[k] - want[k]);
    if (!(d <= worst)) worst = Number.isNaN(d) ? Infinity : d;
  }
  return worst;
}

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const opts = { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 2 };
  const batch = spec.turns[0].input_ids.length;
  const pipe = await GenaiPipeline.open(spec.package, opts, batch);
  const split = pipe.ours.plan === 'split';
  const maxLength = pipe.maxLength;
  const hidden = pipe.cfg.model.decoder.hidden_size;
  const vocab = pipe.cfg.model.vocab_size;
  if (split !== pipe.shared) throw new Error('splitdec.json plan and search.past_present_share_buffer disagree');
  pipe.fillKv(SENTINEL);
  const kv = pipe.kv;
  // media_embeds, bound once with room for the largest turn.
  const capacity = Math.max(0, ...spec.turns.map((t) => t.media.length / hidden));
  const media = new ort.Tensor('float32', new Float32Array(capacity * hidden), [capacity, hidden]);
  pipe.bindExtraInput('media_embeds', media);

  const report = { plan: pipe.ours.plan, ort_version: ort.env.versions?.common ?? 'unknown', turns: [], max_diff: 0,
                   argmax_match: true, same_buffers: split ? true : null, written_in_place: split ? true : null,
                   sentinel_survived: split ? true : null, problems: [] };
  let length = 0;

  // Checks every split buffer after a run that wrote slots [from, to).
  function checkBuffers(out, from, to, what) {
    for (const [layer, b] of kv) {
      for (const which of ['key', 'value']) {
        const name = `present.${layer}.${which}`;
        // onnxruntime-node hands outputs back as copies; what matters is that
        // the copy equals our buffer, i.e. the runtime wrote into our memory.
        const got = out[name].data, mine = b[which].data;
        if (got.length !== mine.length || got.some((x, k) => !Object.is(x, mine[k]))) {
          report.same_buffers = false;
          report.problems.push(`${what}: ${name} differs from the bound buffer`);
        }
        const d = b[which].data, hd = b.layer.head_dim;
        for (let h = 0; h < batch * b.layer.kv_heads; ++h) {  // (sequence, head) pairs
          const base = h * maxLength * hd;
          for (let s = from; s < to; ++s)
            if (d[base + s * hd] === SENTINEL) {
              report.written_in_place = false;
              report.problems.push(`${what}: ${name} head ${h} slot ${s} was not written in our buffer`);
            }
          for (let s = to; s < maxLength; ++s)
            if (d[base + s * hd] !== SENTINEL) {
              report.sentinel_survived = false;
              report.problems.push(`${what}: ${name} head ${h} slot ${s} beyond the length was overwritten`);
              break;
            }
        }
      }
    }
  }

  // rows: one list of token ids per sequence; expect: the stages that must run.
  async function run(rows, expect, stage) {
    const S = rows[0].length;
    const out = await pipe.run(rows);
    if (pipe.stagesRun.join(',') !== expect.join(','))
      report.problems.push(`${stage}: ran stages ${pipe.stagesRun} instead of ${expect}`);
    if (split) checkBuffers(out, length, length + S, `${stage} at length ${length}`);
    length += S;
    return out.logits.data;
  }
  const promptStages = split ? ['embedding', 'prefill'] : ['embedding', 'decoder'];
  // Generation runs embed every id as text (a generated media id too): their own embedding stage.
  const tokenStages = split ? ['token_embedding', 'decode'] : ['token_embedding', 'decoder'];

  for (const [t, turn] of spec.turns.entries()) {
    const S = turn.input_ids[0].length;
    const r = { prompt_tokens: S, prompt_max_diff: 0, step_max_diff: [] };
    media.data.fill(NaN);  // rows this turn does not own must not be read
    media.data.set(turn.media);
    const logits = await run(turn.input_ids, promptStages, `turn ${t} prompt`);
    // A prompt run gives each sequence's last row, what GenAI reads: the
    // graphs declare logits [batch, 1, vocab], so GenAI binds that
    // (trimmed prefill logits) and the LM head runs on the last row only.
    if (!pipe.pruned) report.problems.push(`turn ${t} prompt: logits are not declared [batch, 1, vocab]`);
    for (let b = 0; b < batch; ++b) {
      const last = (b * S + S - 1) * vocab;
      r.prompt_max_diff = Math.max(r.prompt_max_diff,
                                   maxDiff(logits.subarray(b * vocab, (b + 1) * vocab), turn.prompt_logits.slice(last, last + vocab)));
      if (argmax(logits, b * vocab, vocab) !== argmax(turn.prompt_logits, last, vocab)) report.argmax_match = false;
    }
    for (const [k, toks] of turn.decode_tokens.entries()) {
      const step = await run(toks.map((tok) => [tok]), tokenStages, `turn ${t} step ${k}`);
      const want = turn.step_logits.slice(k * batch * vocab, (k + 1) * batch * vocab);
      r.step_max_diff.push(maxDiff(step, want));
      for (let b = 0; b < batch; ++b)
        if (argmax(step, b * vocab, vocab) !== argmax(want, b * vocab, vocab)) report.argmax_match = false;
    }
    report.max_diff = Math.max(report.max_diff, r.prompt_max_diff, ...r.step_max_diff);
    report.turns.push(r);
  }
  report.final_length = length;
  report.ok = report.max_diff <= spec.tolerance && report.argmax_match && report.problems.length === 0;
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }) + '\n');
  process.exit(1);
});
