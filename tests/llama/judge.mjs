// llama.cpp's view of a GGUF (node-llama-cpp's prebuilt CPU build):
// node judge.mjs FILE.gguf TEXT STEPS prints {tokens, steps: [{token,
// logprobs}]}: TEXT tokenized after a BOS (special pieces parsed), then
// STEPS greedy tokens, each with the log-probabilities it was chosen from.
import { getLlama } from "node-llama-cpp";

const [, , path, text, steps] = process.argv;
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath: path });
const context = await model.createContext({ contextSize: 128, batchSize: 128, threads: 2 });
const sequence = context.getSequence();
const tokens = [model.tokens.bos, ...model.tokenize(text, true)];
const out = { tokens, steps: [] };
for await (const r of sequence.evaluateWithMetadata(tokens, { probabilities: true }, { temperature: 0 })) {
  const logprobs = {};
  for (const [t, p] of r.probabilities) logprobs[t] = Math.log(p);
  out.steps.push({ token: r.token, logprobs });
  if (out.steps.length >= Number(steps)) break;
}
// Exit once the output is flushed: a pipe takes it 64 KiB at a time.
process.stdout.write(JSON.stringify(out), () => process.exit(0));
