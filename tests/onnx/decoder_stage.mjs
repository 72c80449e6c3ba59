// Opens the sessions of a package: the embedding graph, and the stage that
// runs on prompts and the one that runs on generated tokens (the same graph
// under `single`).
export async function openPackage(dir, cfg, sessionOptions) {
  const load = (f) => ort.InferenceSession.create(path.join(dir, f), sessionOptions);
  const embedding = await load(cfg.model.embedding.filename);
  if (cfg.splitdec.plan !== 'split') {
    const decoder = await load(cfg.model.decoder.filename);
    return { embedding, prefill: decoder, decode: decoder };
  }
  const stages = cfg.model.decoder.pipeline.map((s) => Object.values(s)[0]);
  return {
    embedding,
    prefill: await load(stages.find((s) => s.run_on_prompt).filename),
    decode: await load(stages.find((s) => s.run_on_token_gen).filename),
  };
}

// One run of a decoder stage of an exported package, as a pipeline runtime
// binds it: positions [length, length + seq) of every sequence, every KV
// buffer as the past input, and under `split` the same tensors as the
// present outputs (past_present_share_buffer). Under `single` the presents
// are new tensors and become the next past.
import path from 'node:path';
import ort from 'onnxruntime-node';

const i64 = (n, f) => BigInt64Array.from({ length: n }, (_, k) => BigInt(f(k)));

// kv: Map layer -> {key, value} of ort.Tensor. inputsEmbeds: [batch, seq,
// hidden]; the rows have equal lengths (no padding). blockIds: batch * seq
// ids, row-major, or null (-1 each).
export async function runDecoderStage(session, kv, split, inputsEmbeds, length, seq, blockIds = null) {
  const batch = inputsEmbeds.dims[0], total = length + seq;
  const feeds = {
    inputs_embeds: inputsEmbeds,
    attention_mask: new ort.Tensor('int64', i64(batch * total, () => 1), [batch, total]),
    position_ids: new ort.Tensor('int64', i64(batch * seq, (k) => length + (k % seq)), [batch, seq]),
  };
  if (session.inputNames.includes('block_ids'))
    feeds.block_ids = new ort.Tensor('int64', i64(batch * seq, (k) => (blockIds ? blockIds[k] : -1)), [batch, seq]);
  const fetches = { logits: null };
  for (const [layer, b] of kv) {
    feeds[`past_key_values.${layer}.key`] = b.key;
    feeds[`past_key_values.${layer}.value`] = b.value;
    fetches[`present.${layer}.key`] = split ? b.key : null;
    fetches[`present.${layer}.value`] = split ? b.value : null;
  }
  const out = await session.run(feeds, fetches);
  if (!split)
    for (const [layer, b] of kv) {
      b.key = out[`present.${layer}.key`];
      b.value = out[`present.${layer}.value`];
    }
  return out;
}
