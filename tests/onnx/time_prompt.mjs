// Prompt processing time of an exported package in ONNX Runtime, run as
// ONNX Runtime GenAI runs it (genai_pipeline.mjs: its stages, its bound
// logits buffer), for the comparison with `splitdec generate` in
// scripts/bench_onnx_prompt.sh:
//
//   node time_prompt.mjs PKG INPUT.json [--threads N] [--rounds R] [--ops]
//
// INPUT.json: {"tokens": [[ids...]]}, text only. Each round: a fresh KV (a
// new pipeline over the same sessions) and one prompt run. Prints
// {"prompt_tokens", "best_ms", "wall_ms"} on stdout: best_ms is the best
// round's time inside ONNX Runtime (its profiler's model_run, summed over the
// stages that ran), which is what a C/C++ caller such as GenAI pays;
// --ops adds last_round_op_ms, the kernel time per operator type in the last
// round. wall_ms adds onnxruntime-node's copies of every output (the KV buffers
// among them) and is printed for reference.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GenaiPipeline, readPackage } from './genai_pipeline.mjs';

async function main() {
  const [pkgDir, input, ...rest] = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = rest.indexOf(name);
    return i >= 0 ? Number(rest[i + 1]) : dflt;
  };
  const threads = opt('--threads', 2), rounds = opt('--rounds', 3);
  const ids = JSON.parse(fs.readFileSync(input, 'utf8')).tokens[0];
  const pkg = readPackage(pkgDir);
  const prefix = path.join(os.tmpdir(), `splitdec-time-prompt-${process.pid}`);
  const sessions = [];
  for (const [k, s] of pkg.stages.entries())
    sessions.push(await ort.InferenceSession.create(path.join(pkgDir, s.filename), {
      executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, logSeverityLevel: 3,
      enableProfiling: true, profileFilePrefix: `${prefix}-${k}` }));
  const hidden = pkg.cfg.model.decoder.hidden_size;
  const wall = [];
  const logitsPool = new Map();  // one logits buffer for every round, as GenAI's arena reuses memory
  for (let r = 0; r < rounds; ++r) {
    const pipe = new GenaiPipeline(pkg, sessions, 1);
    pipe.logitsPool = logitsPool;
    pipe.bindExtraInput('media_embeds', new ort.Tensor('float32', new Float32Array(0), [0, hidden]));
    const t0 = performance.now();
    await pipe.run([ids]);
    wall.push(performance.now() - t0);
  }
  // model_run durations per round, summed over the stages (one run each per round).
  const inside = new Array(rounds).fill(0);
  const opMs = {};  // --ops: kernel time per operator type in the last round, over the stages
  for (const [k, session] of sessions.entries()) {
    session.endProfiling();
    const file = fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(path.basename(`${prefix}-${k}`) + '_')).map((f) => path.join(os.tmpdir(), f))[0];
    if (!file) continue;
    const events = JSON.parse(fs.readFileSync(file, 'utf8'));
    fs.unlinkSync(file);
    const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((x, y) => x.ts - y.ts);
    runs.forEach((e, r) => (inside[r] += e.dur / 1000));
    const last = runs[runs.length - 1];
    for (const e of events)
      if (last && e.cat === 'Node' && e.name.endsWith('_kernel_time') && e.ts >= last.ts && e.args && e.args.op_name)
        opMs[e.args.op_name] = (opMs[e.args.op_name] || 0) + e.dur / 1000;
    await session.release();
  }
  const report = { prompt_tokens: ids.length, best_ms: Math.min(...inside), inside_ms: inside, wall_ms: wall };
  if (rest.includes('--ops')) report.last_round_op_ms = opMs;
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => {
  process.stderr.write(`time_prompt.mjs: error: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
