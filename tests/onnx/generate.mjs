// Greedy generation with an exported package in ONNX Runtime, from the same
// exact-input JSON that `splitdec generate --input` takes (one sequence):
//
//   node generate.mjs PKG INPUT.json [--max-new-tokens N]
//
// INPUT.json: {"tokens": [[ids...]], "modality": [["text"|"image"|...]],
// "media_embeddings": "rows.npy"} (float32 [n, hidden], relative to the JSON
// file). Prints {"tokens": [generated ids], "stop_reason": ...} on stdout.
// The graphs find media positions and blocks by token id, so every non-text
// position must hold the model's image, video or audio token id. The package
// runs as ONNX Runtime GenAI runs it (genai_pipeline.mjs): the caller binds
// media_embeds and nothing else.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { GenaiPipeline, readPackage } from './genai_pipeline.mjs';

function fail(msg) {
  process.stderr.write(`generate.mjs: error: ${msg}\n`);
  process.exit(1);
}

// A float32 .npy of shape [n, hidden] (C order).
function readNpy(file, hidden) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') fail(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header))
    fail(`${file}: media rows must be little-endian float32 in C order (${header.trim()})`);
  const shape = (header.match(/'shape':\s*\(([^)]*)\)/) || [])[1]?.split(',').filter((s) => s.trim()).map(Number);
  if (!shape || shape.length !== 2 || shape[1] !== hidden) fail(`${file}: shape must be [n, ${hidden}], got [${shape}]`);
  const bytes = buf.subarray(start, start + shape[0] * hidden * 4);
  if (bytes.length !== shape[0] * hidden * 4) fail(`${file}: truncated (${bytes.length} bytes of data)`);
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
}

async function main() {
  const args = process.argv.slice(2);
  let maxNew = 16;
  const pos = [];
  for (let k = 0; k < args.length; ++k) {
    if (args[k] === '--max-new-tokens') maxNew = Number(args[++k]);
    else pos.push(args[k]);
  }
  if (pos.length !== 2 || !(maxNew >= 1)) fail('usage: generate.mjs PKG INPUT.json [--max-new-tokens N]');
  const [dir, inputFile] = pos;
  const { cfg, ours: sd } = readPackage(dir);
  const hidden = cfg.model.decoder.hidden_size, vocab = cfg.model.vocab_size;
  const input = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
  if (!Array.isArray(input.tokens) || input.tokens.length !== 1) fail('input: exactly one sequence in "tokens"');
  const tokens = input.tokens[0], modality = input.modality?.[0] ?? tokens.map(() => 'text');
  if (modality.length !== tokens.length) fail('input: "modality" and "tokens" differ in length');
  const mediaIds = new Set(Object.values(sd.media_token_ids).filter((id) => id >= 0));
  tokens.forEach((t, k) => {
    if (!Number.isInteger(t) || t < 0 || t >= vocab) fail(`input: token ${t} at position ${k} is outside [0, ${vocab})`);
    if ((modality[k] !== 'text') !== mediaIds.has(t))
      fail(`input: position ${k} is ${modality[k]} but holds token ${t}; media positions must hold a media token id`);
  });
  if (tokens.length + maxNew > sd.max_length)
    fail(`prompt of ${tokens.length} tokens + ${maxNew} new tokens exceeds the package's max_length ${sd.max_length}`);
  const media = input.media_embeddings
    ? readNpy(path.resolve(path.dirname(inputFile), input.media_embeddings), hidden) : new Float32Array(0);
  const nMedia = modality.filter((m) => m !== 'text').length;
  if (media.length !== nMedia * hidden) fail(`input: ${nMedia} media positions but ${media.length / hidden} media rows`);

  const opts = { executionProviders: ['cpu'], logSeverityLevel: 3 };
  const pipe = await GenaiPipeline.open(dir, opts);
  pipe.bindExtraInput('media_embeds', new ort.Tensor('float32', media, [nMedia, hidden]));
  // The last row of the logits GenAI binds ([1, 1, vocab] for splitdec's graphs).
  const argmaxLast = (logits) => {
    let best = 0;
    const off = logits.length - vocab;
    for (let k = 1; k < vocab; ++k) if (logits[off + k] > logits[off + best]) best = k;
    return best;
  };

  const eos = new Set([].concat(cfg.model.eos_token_id));
  let out = await pipe.run([tokens]);
  let next = argmaxLast(out.logits.data);
  const generated = [];
  let stop = 'max_new_tokens';
  for (;;) {
    generated.push(next);
    if (eos.has(next)) { stop = 'eos'; break; }
    if (generated.length >= maxNew) break;
    out = await pipe.run([[next]]);
    next = argmaxLast(out.logits.data);
  }
  process.stdout.write(JSON.stringify({ tokens: generated, stop_reason: stop }) + '\n');
}

main().catch((e) => fail(String(e && e.message ? e.message : e)));
