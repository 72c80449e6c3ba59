// Per-token decode cost of an exported `single` package against a `split`
// package, from ONNX Runtime's own profiler (kernel times, not wall time of
// this script; onnxruntime-node's copies of outputs into JavaScript are
// outside them).
//
//   node --expose-gc profile_decode.mjs SPLIT_PKG SINGLE_PKG [--contexts 1024,4096,16384] [--steps 8] [--warmup 2] [--threads 1]
//
// For each context C, each package's decode graph runs warmup + steps
// decode steps after a synthetic past of C positions (random K/V, as
// splitdec's benchmark does): split on its shared buffers bound as past and
// present, single with separate past/present where present becomes the
// next past. Per measured step it sums, from the profile: the attention
// operators (GroupQueryAttention / Attention), the mask and bias nodes, all
// kernels, and the whole run. Prints a table, then one JSON line.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { readPackage } from './genai_pipeline.mjs';

function parseArgs(argv) {
  const a = { contexts: [1024, 4096, 16384], steps: 8, warmup: 2, threads: 1, pkgs: [] };
  for (let k = 0; k < argv.length; ++k) {
    if (argv[k] === '--contexts') a.contexts = argv[++k].split(',').map(Number);
    else if (argv[k] === '--steps') a.steps = Number(argv[++k]);
    else if (argv[k] === '--warmup') a.warmup = Number(argv[++k]);
    else if (argv[k] === '--threads') a.threads = Number(argv[++k]);
    else a.pkgs.push(argv[k]);
  }
  if (a.pkgs.length !== 2) throw new Error('usage: profile_decode.mjs SPLIT_PKG SINGLE_PKG [--contexts ...]');
  return a;
}

// Fills a big array from a small random block: values are irrelevant to the
// cost, and Math.random over gigabytes would dominate the run.
function fillRandom(data) {
  const block = new Float32Array(4096).map(() => Math.random() * 2 - 1);
  for (let off = 0; off < data.length; off += block.length)
    data.set(block.subarray(0, Math.min(block.length, data.length - off)), off);
}

const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

async function profile(pkgDir, context, args) {
  const { cfg, ours: sd, stages } = readPackage(pkgDir);
  const split = sd.plan === 'split';
  // The decoder stage a generated token runs (the embedding stage is not measured).
  const stage = stages.find((s) => s.run_on_token_gen && !s.name.endsWith('embedding'));
  const file = stage.filename;
  if (split && context + args.warmup + args.steps > sd.max_length)
    throw new Error(`${pkgDir}: max_length ${sd.max_length} < context ${context} + steps`);
  const prefix = path.join(os.tmpdir(), `splitdec-profile-${process.pid}-${sd.plan}-${context}`);
  const session = await ort.InferenceSession.create(path.join(pkgDir, file), {
    executionProviders: ['cpu'], intraOpNumThreads: args.threads, interOpNumThreads: 1,
    enableProfiling: true, profileFilePrefix: prefix, logSeverityLevel: 3 });

  const kv = new Map();
  for (const l of sd.layers.filter((l) => l.kv_source === l.layer)) {
    const len = split ? sd.max_length : context;
    const make = () => {
      const t = new ort.Tensor('float32', new Float32Array(l.kv_heads * len * l.head_dim), [1, l.kv_heads, len, l.head_dim]);
      fillRandom(t.data);
      return t;
    };
    kv.set(l.layer, { key: make(), value: make() });
  }
  const hidden = cfg.model.decoder.hidden_size;
  const embeds = new ort.Tensor('float32', new Float32Array(hidden).map(() => Math.random()), [1, 1, hidden]);
  let length = context;
  for (let step = 0; step < args.warmup + args.steps; ++step) {
    const total = length + 1;
    const feeds = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from([0n]), [1, 1]),
      inputs_embeds: embeds,
      attention_mask: new ort.Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from([BigInt(length)]), [1, 1]),
    };
    const fetches = { logits: null };
    for (const [layer, b] of kv) {
      feeds[`past_key_values.${layer}.key`] = b.key;
      feeds[`past_key_values.${layer}.value`] = b.value;
      fetches[`present.${layer}.key`] = split ? b.key : null;
      fetches[`present.${layer}.value`] = split ? b.value : null;
    }
    for (const n of Object.keys(feeds)) if (!stage.inputs.includes(n)) delete feeds[n];
    let out = await session.run(feeds, fetches);
    if (!split)
      for (const [layer, b] of kv) (b.key = out[`present.${layer}.key`]), (b.value = out[`present.${layer}.value`]);
    length += 1;
    // onnxruntime-node returns every output as a fresh copy (gigabytes at
    // long contexts); collect it now so that freeing it does not overlap the
    // next measured run.
    out = null;
    if (global.gc) global.gc();
    await new Promise((r) => setTimeout(r, 300));
  }
  session.endProfiling();
  await session.release();
  const dir = path.dirname(prefix), base = path.basename(prefix);
  const profFile = fs.readdirSync(dir).filter((f) => f.startsWith(base) && f.endsWith('.json')).map((f) => path.join(dir, f))[0];
  const events = JSON.parse(fs.readFileSync(profFile, 'utf8'));
  if (!process.env.KEEP_PROFILE) fs.unlinkSync(profFile);

  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((x, y) => x.ts - y.ts).slice(args.warmup);
  const nodes = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));
  const per = runs.map((r) => {
    const inRun = nodes.filter((e) => e.ts >= r.ts && e.ts <= r.ts + r.dur);
    const sum = (pred) => inRun.filter(pred).reduce((acc, e) => acc + e.dur, 0);
    return {
      attention: sum((e) => ['Attention', 'GroupQueryAttention'].includes(e.args?.op_name)),
      mask: sum((e) => e.name.startsWith('mask/')),
      kernels: sum(() => true),
      run: r.dur,
    };
  });
  const m = (k) => median(per.map((p) => p[k])) / 1000;  // ms
  return { plan: sd.plan, context, attention_ms: m('attention'), mask_ms: m('mask'), kernels_ms: m('kernels'), run_ms: m('run'),
           steps: per.length };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const rows = [];
  // A throwaway pass first: the first sessions of a process pay page faults
  // on the mapped weights and the allocator's first growth.
  for (const pkg of args.pkgs) await profile(pkg, args.contexts[0], { ...args, steps: 2, warmup: 1 });
  console.log('context  plan    attention ms  mask+bias ms  all kernels ms  model_run ms');
  for (const context of args.contexts) {
    const r = {};
    for (const pkg of args.pkgs) {
      const p = await profile(pkg, context, args);
      r[p.plan] = p;
      console.log(`${String(context).padStart(7)}  ${p.plan.padEnd(6)}  ${p.attention_ms.toFixed(3).padStart(12)}  ` +
                  `${p.mask_ms.toFixed(3).padStart(12)}  ${p.kernels_ms.toFixed(3).padStart(14)}  ${p.run_ms.toFixed(3).padStart(12)}`);
    }
    const ratio = (k) => r.single[`${k}_ms`] / r.split[`${k}_ms`];
    const row = { context, split: r.split, single: r.single,
                  single_over_split: { attention: ratio('attention'), kernels: ratio('kernels'), run: ratio('run') } };
    console.log(`         single/split: attention ${row.single_over_split.attention.toFixed(2)}x, ` +
                `kernels ${row.single_over_split.kernels.toFixed(2)}x, model_run ${row.single_over_split.run.toFixed(2)}x`);
    rows.push(row);
  }
  console.log(JSON.stringify({ onnxruntime: '1.30.0', threads: args.threads, steps: args.steps, results: rows }));
}

main().catch((e) => { console.error(e); process.exit(1); });
