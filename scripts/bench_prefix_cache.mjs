// Plays `chats` five-turn chats against a running `splitdec serve` as an
// OpenAI client does (each turn resends every earlier turn and reply),
// streamed, and prints JSON: per turn, the median time to first token and
// the last chat's prompt, cached and completion tokens.
//   node scripts/bench_prefix_cache.mjs URL CHATS TURNS MAX_TOKENS [TAG] [IMAGE]
// TAG starts every chat's first message (a warm-up's chats share nothing with the measured ones).
// IMAGE (a PNG or JPEG file): the first user message of every chat holds it
// before its text, as an image_url data URI, so every later turn resends it.
import { readFileSync } from "node:fs";
const [url, chats = "3", turns = "5", maxTokens = "32", tag = "Chat", image = ""] = process.argv.slice(2);
const imagePart = image
  ? { type: "image_url", image_url: { url: `data:image/${image.endsWith(".png") ? "png" : "jpeg"};base64,` +
                                          readFileSync(image).toString("base64") } }
  : null;

// About 100 words per user turn.
const words = "the sea is wide and the waves are long and grey under a low sky where birds turn ".repeat(6);

async function turn(messages) {
  const start = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages, max_tokens: Number(maxTokens), temperature: 0, stream: true,
                           stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffered = "", text = "", ttft = null, usage = null;
  for await (const bytes of res.body) {
    buffered += decoder.decode(bytes, { stream: true });
    let at;
    while ((at = buffered.indexOf("\n\n")) >= 0) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 2);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const event = JSON.parse(line.slice(6));
      if (event.usage) usage = event.usage;
      const choice = event.choices && event.choices[0];
      if (!choice) continue;
      // The first token: its text, or the end of a reply whose text is empty.
      if (ttft === null && ((choice.delta && choice.delta.content) || choice.finish_reason)) ttft = performance.now() - start;
      if (choice.delta && choice.delta.content) text += choice.delta.content;
    }
  }
  return { text, ttft, usage };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ttfts = Array.from({ length: Number(turns) }, () => []);
let last = [];  // the last chat's usage per turn
for (let c = 0; c < Number(chats); ++c) {
  const messages = [];
  last = [];
  for (let t = 0; t < Number(turns); ++t) {
    const text = `${tag} ${c}, question ${t}: ${words}`;
    messages.push({ role: "user", content: imagePart && t === 0 ? [imagePart, { type: "text", text }] : text });
    const r = await turn(messages);
    ttfts[t].push(r.ttft);
    messages.push({ role: "assistant", content: r.text });
    last.push(r.usage);
  }
}
console.log(JSON.stringify({
  ttft_ms_median_per_turn: ttfts.map((xs) => Number(median(xs).toFixed(1))),
  prompt_tokens_per_turn: last.map((u) => u && u.prompt_tokens),
  cached_tokens_per_turn: last.map((u) => u && u.prompt_tokens_details && u.prompt_tokens_details.cached_tokens),
  completion_tokens_per_turn: last.map((u) => u && u.completion_tokens),
}));
