// An exported package run the way ONNX Runtime GenAI's `decoder-pipeline`
// model runs it (microsoft/onnxruntime-genai at a0c04eb13,
// src/models/decoder_only_pipeline.cpp, DecoderOnlyPipelineState::Run /
// RunPipeline), so that these tests hold the package to that runtime's rules:
//
// - the stages of genai_config.json's model.decoder.pipeline run in order;
//   a run of more than one token is a prompt run (run_on_prompt stages),
//   a single token a generation run (run_on_token_gen stages);
// - a stage gets exactly the inputs it lists, from: the managed inputs
//   (input_ids, attention_mask, position_ids, the KV buffers), the outputs
//   of earlier stages in this run, and the extra inputs the caller bound;
//   an input from none of them is an error here (ONNX Runtime would miss it);
// - the managed outputs (logits, present.*) go to the runtime's buffers:
//   with search.past_present_share_buffer the past buffer itself
//   [batch, kv_heads, max_length, head_dim]; otherwise a new present that
//   becomes the next past;
// - the logits output is bound to a buffer that the runtime allocates
//   (src/models/logits.cpp, Logits::Update): [batch, 1, vocab] on every run
//   when the graphs declare the logits' second dim as 1 (Model::IsPruned:
//   trimmed prefill logits), else [batch, run length, vocab], of which it
//   reads each sequence's last row (Logits::Get);
// - extra inputs are bound once (Generator::AppendTokens calls
//   SetExtraInputs on the first run only): binding a name twice throws.
//   A caller that needs new media rows per turn writes them into the tensor
//   it bound (OgaCreateTensorFromBuffer wraps the caller's memory).
//
// The KV layers are found as GenAI finds them, from the stages' input names
// (past_key_values.N.key); their shapes come from splitdec.json.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

const i64 = (n, f) => BigInt64Array.from({ length: n }, (_, k) => BigInt(f(k)));

export function readPackage(dir) {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'genai_config.json'), 'utf8'));
  const ours = JSON.parse(fs.readFileSync(path.join(dir, 'splitdec.json'), 'utf8'));
  // gemma3 / gemma4 with a pipeline: contrib/onnxruntime-genai's GemmaPipelineModel (genai_multimodal.mjs).
  const gemma = cfg.model.type === 'gemma3' || cfg.model.type === 'gemma4';
  if (cfg.model.type !== 'decoder-pipeline' && !(gemma && cfg.model.decoder.pipeline))
    throw new Error(`model.type ${cfg.model.type} is not decoder-pipeline`);
  const stages = cfg.model.decoder.pipeline.map((entry) => {
    const [name, s] = Object.entries(entry)[0];
    return { name, ...s };
  });
  return { cfg, ours, stages };
}

// Model::IsPruned: the logits output's declared second dim is 1 (GenAI reads
// it from the session that declares `logits`; every splitdec graph does the same).
export function logitsArePruned(sessions) {
  const shapes = sessions.flatMap((s) => s.outputMetadata.filter((m) => m.name === 'logits').map((m) => m.shape));
  return shapes.length > 0 && shapes.every((shape) => shape[1] === 1);
}

export class GenaiPipeline {
  // batch: sequences run together (equal lengths, no padding).
  static async open(dir, sessionOptions, batch = 1) {
    const pkg = readPackage(dir);
    const sessions = [];
    for (const s of pkg.stages) sessions.push(await ort.InferenceSession.create(path.join(dir, s.filename), sessionOptions));
    return new GenaiPipeline(pkg, sessions, batch);
  }

  constructor(pkg, sessions, batch) {
    Object.assign(this, pkg);
    this.sessions = sessions;
    this.batch = batch;
    this.shared = this.cfg.search.past_present_share_buffer === true;
    this.maxLength = this.cfg.search.max_length;
    this.length = 0;
    this.extra = new Map();
    this.logitsPool = new Map();
    this.stagesRun = [];
    this.pruned = logitsArePruned(sessions);
    const prefix = 'past_key_values.';
    const layers = new Set();
    for (const s of this.stages)
      for (const n of s.inputs)
        if (n.startsWith(prefix) && n.endsWith('.key')) layers.add(Number(n.slice(prefix.length, -4)));
    this.kv = new Map();
    for (const layer of [...layers].sort((a, b) => a - b)) {
      const l = this.ours.layers[layer];
      const dims = [batch, l.kv_heads, this.shared ? this.maxLength : 0, l.head_dim];
      const make = () => new ort.Tensor('float32', new Float32Array(dims.reduce((a, b) => a * b, 1)), dims);
      this.kv.set(layer, { key: make(), value: make(), layer: l });
    }
  }

  // The logits buffer GenAI binds, new for each run length. GenAI takes it
  // from ONNX Runtime's arena, which keeps freed memory, so a caller timing
  // runs may share `logitsPool` across pipelines (a fresh gigabyte costs
  // page faults that GenAI's arena does not pay again).
  logitsBuffer(dims) {
    const key = dims.join('x');
    if (!this.logitsPool.has(key))
      this.logitsPool.set(key, new ort.Tensor('float32', new Float32Array(dims[0] * dims[1] * dims[2]), dims));
    return this.logitsPool.get(key);
  }

  // Fills every shared KV buffer with `value` (tests check what was written).
  fillKv(value) {
    for (const b of this.kv.values()) b.key.data.fill(value), b.value.data.fill(value);
  }

  bindExtraInput(name, tensor) {
    if (this.extra.has(name)) throw new Error(`extra input ${name} is already bound (ONNX Runtime GenAI binds extra inputs once)`);
    this.extra.set(name, tensor);
  }

  // rows: one list of token ids per sequence. Returns every output of the
  // stages that ran, by name (logits among them).
  async run(rows) {
    const B = this.batch, S = rows[0].length, total = this.length + S;
    if (rows.length !== B || rows.some((r) => r.length !== S)) throw new Error('rows must be batch rows of equal length');
    if (total > this.maxLength) throw new Error(`${total} positions exceed max_length ${this.maxLength}`);
    const managed = new Map([
      ['input_ids', new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), [B, S])],
      ['attention_mask', new ort.Tensor('int64', i64(B * total, () => 1), [B, total])],
      ['position_ids', new ort.Tensor('int64', i64(B * S, (k) => this.length + (k % S)), [B, S])],
    ]);
    for (const [layer, b] of this.kv) {
      managed.set(`past_key_values.${layer}.key`, b.key);
      managed.set(`past_key_values.${layer}.value`, b.value);
    }
    const promptRun = S > 1;
    const store = new Map(), all = {};
    this.stagesRun = [];
    for (const [k, stage] of this.stages.entries()) {
      if (promptRun ? !stage.run_on_prompt : !stage.run_on_token_gen) continue;
      const feeds = {};
      for (const n of stage.inputs) {
        const v = managed.get(n) ?? store.get(n) ?? this.extra.get(n);
        if (!v) throw new Error(`stage ${stage.name}: input ${n} is neither managed, an earlier stage's output nor a bound extra input`);
        feeds[n] = v;
      }
      const fetches = {};
      for (const n of stage.outputs) {
        const m = /^present\.(\d+)\.(key|value)$/.exec(n);
        fetches[n] = m && this.shared ? this.kv.get(Number(m[1]))[m[2]] : null;
      }
      // GenAI binds its own logits buffer (Logits::Update), so a stage's
      // logits must have that shape.
      if (stage.outputs.includes('logits'))
        fetches.logits = this.logitsBuffer([B, this.pruned ? 1 : S, this.cfg.model.vocab_size]);
      const out = await this.sessions[k].run(feeds, fetches);
      for (const n of stage.outputs) store.set(n, out[n]), (all[n] = out[n]);
      this.stagesRun.push(stage.name);
    }
    if (!this.shared)
      for (const [layer, b] of this.kv) {
        b.key = all[`present.${layer}.key`];
        b.value = all[`present.${layer}.value`];
      }
    this.length = total;
    return all;
  }

  async release() {
    for (const s of this.sessions) await s.release();
  }
}
