// llama.cpp's side of scripts/peer_llama_cpp.sh (node-llama-cpp's prebuilt
// CPU build): node peer_llama_cpp.mjs FILE.gguf IDS.json DECODE_TOKENS THREADS
// prints {prompt_tokens, prefill_ms, decode_tokens, decode_ms}: the prompt's
// token ids ({"tokens": [[...]]}, as splitdec's --input) evaluated as one
// batch, then DECODE_TOKENS greedy tokens.
import { readFileSync } from "node:fs";
import { getLlama } from "node-llama-cpp";

const [, , path, idsPath, steps, threads] = process.argv;
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath: path });
const tokens = JSON.parse(readFileSync(idsPath, "utf8")).tokens[0];
const context = await model.createContext({
  contextSize: tokens.length + Number(steps) + 16, batchSize: tokens.length, threads: Number(threads),
});
const sequence = context.getSequence();
let t0 = performance.now(), first = 0, n = 0;
for await (const r of sequence.evaluate(tokens, { temperature: 0 })) {
  if (n === 0) first = performance.now();  // the prompt prefilled and its first token chosen
  if (++n > Number(steps)) break;
  void r;
}
const end = performance.now();
process.stdout.write(JSON.stringify({
  prompt_tokens: tokens.length, prefill_ms: first - t0, decode_tokens: n - 1, decode_ms: end - first,
}) + "\n");
process.exit(0);
