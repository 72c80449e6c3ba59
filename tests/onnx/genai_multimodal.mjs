// A `--genai-route multimodal` package run the way ONNX Runtime GenAI's
// multimodal route runs a model of type gemma3 or gemma4
// (microsoft/onnxruntime-genai at a0c04eb13: src/models/multi_modal.cpp,
// MultiModalPipelineState; multi_modal_features.cpp; logits.cpp), so the
// tests hold the package to that runtime's rules:
//
// - a prompt run with images runs vision.onnx once on what GenAI's
//   processor makes: pixel_values [images, 3, S, S] (Gemma-3), or
//   pixel_values [images, patches, 768] and pixel_position_ids [images,
//   patches, 2] (Gemma-4). Its image_features buffer is [images, tokens,
//   hidden] when the graph's output has rank 3, else [tokens, hidden]
//   (GenAI sizes it; the graph must fill it), tokens being 256 for Gemma-3
//   and the processor's count for image 0 for Gemma-4;
// - the embedding graph runs on every run, fed input_ids and image_features:
//   the vision output on a prompt run with images, else an empty
//   [0, hidden] (the embedding input's own rank decides: 2-D for an input
//   without a rank-3 shape);
// - the decoder gets inputs_embeds (and the embedding's per_layer_inputs
//   where the config names them), attention_mask, position_ids, input_ids
//   only if its graph declares it, and the KV: with
//   search.past_present_share_buffer false a present per run that becomes the
//   next past;
// - logits are bound as [batch, 1, vocab] when the decoder declares that
//   shape (Model::IsPruned), else [batch, run length, vocab]; the last row
//   is read.
//
// A split package (model.decoder.pipeline) runs as contrib/onnxruntime-genai's
// GemmaPipelineModel runs it: vision.onnx as above, its output the pipeline
// value media_embeds for the prompt run ([0, hidden] otherwise), then the
// pipeline's stages under GenAI's pipeline rules (genai_pipeline.mjs).
//
// As a program: greedy generation of one sequence.
//
//   node genai_multimodal.mjs PKG IDS.json [PIXELS.npy [POSITIONS.npy]] [--max-new-tokens N]
//
// IDS.json: {"tokens": [ids...]} (the prompt as GenAI's processor expands
// it); PIXELS.npy: float32, the processor's pixel_values; POSITIONS.npy:
// int64 [images, patches, 2] (Gemma-4). Prints {"tokens": [...],
// "step_logits": [[vocab floats] per generated token]}.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GenaiPipeline, logitsArePruned } from './genai_pipeline.mjs';

const i64 = (n, f) => BigInt64Array.from({ length: n }, (_, k) => BigInt(f(k)));
// GenAI's Gemma-3 processor expands every image to this many tokens (gemma_image_processor.cpp).
const kImageTokens = 256;

export class GenaiMultimodal {
  static async open(dir, sessionOptions) {
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'genai_config.json'), 'utf8'));
    const ours = JSON.parse(fs.readFileSync(path.join(dir, 'splitdec.json'), 'utf8'));
    if (cfg.model.type !== 'gemma3' && cfg.model.type !== 'gemma4')
      throw new Error(`model.type ${cfg.model.type} is neither gemma3 nor gemma4`);
    const open = (section) => ort.InferenceSession.create(path.join(dir, cfg.model[section].filename), sessionOptions);
    const vision = await open('vision');
    if (cfg.model.decoder.pipeline) return new GenaiMultimodal(cfg, ours, vision, await GenaiPipeline.open(dir, sessionOptions));
    return new GenaiMultimodal(cfg, ours, vision, null, await open('embedding'), await open('decoder'));
  }

  constructor(cfg, ours, vision, pipeline, embedding, decoder) {
    Object.assign(this, { cfg, ours, vision, pipeline, embedding, decoder });
    this.hidden = cfg.model.decoder.hidden_size;
    this.vocab = cfg.model.vocab_size;
    this.length = 0;
    this.kv = new Map();
    if (pipeline) return;
    if (cfg.search.past_present_share_buffer === true)
      throw new Error('GenAI runs a single decoder with past_present_share_buffer false here');
    this.pruned = logitsArePruned([decoder]);  // Model::IsPruned, decided once at load
    for (const n of decoder.inputNames) {
      const m = /^past_key_values\.(\d+)\.key$/.exec(n);
      if (!m) continue;
      const l = ours.layers[Number(m[1])];
      const empty = () => new ort.Tensor('float32', new Float32Array(0), [1, l.kv_heads, 0, l.head_dim]);
      this.kv.set(Number(m[1]), { key: empty(), value: empty() });
    }
  }

  name(section, key, kind = 'inputs') {
    return this.cfg.model[section][kind][key];
  }

  // ids: the run's token ids (one sequence); pixels (and, for Gemma-4,
  // positions): ort.Tensor of the processor's outputs on the prompt run with
  // images, else null. Returns the last row's logits.
  async run(ids, pixels = null, positions = null) {
    const S = ids.length, total = this.length + S, H = this.hidden;
    const inputIds = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, S]);
    let features = new ort.Tensor('float32', new Float32Array(0), [0, H]);
    if (pixels && S > 1) {
      const out = this.name('vision', 'image_features', 'outputs');
      const images = pixels.dims[0];
      const feeds = { [this.name('vision', 'pixel_values')]: pixels };
      if (positions) feeds[this.name('vision', 'pixel_position_ids')] = positions;
      const r = await this.vision.run(feeds);
      const got = r[out];
      // Gemma-4: the processor's soft-token count of image 0, for every image.
      const perImage = this.cfg.model.type === 'gemma3' ? kImageTokens
        : ids.filter((t) => t === this.cfg.model.image_token_id).length / images;
      const want = got.dims.length === 3 ? [images, perImage, H] : [perImage, H];
      if (got.dims.join(',') !== want.join(','))
        throw new Error(`vision.onnx gave image_features [${got.dims}]; GenAI allocates [${want}] for ${images} image(s)`);
      features = got;
    }
    if (this.pipeline) {
      // GemmaPipelineState: the vision rows are the pipeline value the
      // prompt-stage embedding lists; no rows for every other run.
      this.pipeline.extra.set(this.name('embedding', 'image_features'), features);
      const out = await this.pipeline.run([ids]);
      return out.logits.data.slice(out.logits.data.length - this.vocab);
    }
    const emb = await this.embedding.run({
      [this.cfg.model.decoder.inputs.input_ids]: inputIds,  // GenAI names the embedding's ids by the decoder's key
      [this.name('embedding', 'image_features')]: features,
    });
    const feeds = {
      [this.cfg.model.decoder.inputs.inputs_embeds]: emb[this.name('embedding', 'inputs_embeds', 'outputs')],
      attention_mask: new ort.Tensor('int64', i64(total, () => 1), [1, total]),
      position_ids: new ort.Tensor('int64', i64(S, (k) => this.length + k), [1, S]),
    };
    if (this.decoder.inputNames.includes('input_ids')) feeds.input_ids = inputIds;
    // Gemma-4 E2B / E4B: the embedding graph's per-layer inputs go to the decoder.
    const perLayer = this.cfg.model.decoder.inputs.per_layer_inputs;
    if (perLayer) feeds[perLayer] = emb[this.name('embedding', 'per_layer_inputs', 'outputs')];
    for (const [l, b] of this.kv) {
      feeds[`past_key_values.${l}.key`] = b.key;
      feeds[`past_key_values.${l}.value`] = b.value;
    }
    const rows = this.pruned ? 1 : S;
    const logits = new ort.Tensor('float32', new Float32Array(rows * this.vocab), [1, rows, this.vocab]);
    const out = await this.decoder.run(feeds, { ...Object.fromEntries(this.decoder.outputNames.map((n) => [n, null])), logits });
    for (const [l, b] of this.kv) b.key = out[`present.${l}.key`], b.value = out[`present.${l}.value`];
    this.length = total;
    return logits.data.slice((rows - 1) * this.vocab);
  }
}

// A float32 or int64 .npy (C order) as an ort.Tensor.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const v1 = buf[6] === 1, len = v1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8), start = (v1 ? 10 : 12) + len;
  const header = buf.toString('latin1', v1 ? 10 : 12, start);
  const i64 = /'descr':\s*'<i8'/.test(header);
  if (!i64 && !/'descr':\s*'<f4'/.test(header)) throw new Error(`${file}: neither little-endian float32 nor int64`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const n = shape.reduce((a, b) => a * b, 1);
  const bytes = buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + (i64 ? 8 : 4) * n);
  return i64 ? new ort.Tensor('int64', new BigInt64Array(bytes), shape) : new ort.Tensor('float32', new Float32Array(bytes), shape);
}

async function main() {
  const args = process.argv.slice(2);
  let maxNew = 8;
  const pos = [];
  for (let k = 0; k < args.length; ++k) {
    if (args[k] === '--max-new-tokens') maxNew = Number(args[++k]);
    else pos.push(args[k]);
  }
  if (pos.length < 2 || pos.length > 4)
    throw new Error('usage: genai_multimodal.mjs PKG IDS.json [PIXELS.npy [POSITIONS.npy]] [--max-new-tokens N]');
  const model = await GenaiMultimodal.open(pos[0], { executionProviders: ['cpu'], logSeverityLevel: 3 });
  const ids = JSON.parse(fs.readFileSync(pos[1], 'utf8')).tokens;
  const [pixels, positions] = [pos[2], pos[3]].map((f) => (f ? readNpy(f) : null));
  const argmax = (a) => a.reduce((best, x, k) => (x > a[best] ? k : best), 0);
  const eos = new Set([].concat(model.cfg.model.eos_token_id));
  const tokens = [], stepLogits = [];
  let logits = await model.run(ids, pixels, positions);
  for (;;) {
    const next = argmax(logits);
    tokens.push(next), stepLogits.push(Array.from(logits));
    if (eos.has(next) || tokens.length >= maxNew) break;
    logits = await model.run([next]);
  }
  process.stdout.write(JSON.stringify({ tokens, step_logits: stepLogits }) + '\n');
}

if (import.meta.url === `file://${process.argv[1]}`)
  main().catch((e) => {
    process.stderr.write(`genai_multimodal.mjs: error: ${e && e.message ? e.message : e}\n`);
    process.exit(1);
  });
