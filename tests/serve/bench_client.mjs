// Load generator for scripts/bench_serve.sh (Node >= 18, no packages):
//   node bench_client.mjs BASE_URL CONCURRENCY REQUESTS_PER_CLIENT MAX_TOKENS
// Each client sends its requests one after another (streamed, greedy) and
// times every content event. Prints one JSON line: aggregate generated
// tokens/s over the wall time, p50/p99 time to first token and inter-token
// latency (ms).
const [base, conc, perClient, maxTokens] = process.argv.slice(2);
const C = Number(conc), R = Number(perClient), T = Number(maxTokens);

async function one(i) {
  const t0 = performance.now();
  const res = await fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      messages: [{ role: "user", content: `Client ${i}: write about the sea and the sky.` }],
      temperature: 0, max_tokens: T, stream: true, stream_options: { include_usage: true },
    }),
  });
  if (res.status !== 200) throw new Error("HTTP " + res.status + " " + (await res.text()));
  const times = [];
  let usage = null, buf = "";
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buf += decoder.decode(bytes, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) usage = j.usage;
      if (j.choices?.[0]?.delta?.content) times.push(performance.now());
    }
  }
  return { t0, times, tokens: usage ? usage.completion_tokens : times.length };
}

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const start = performance.now();
const results = (await Promise.all(Array.from({ length: C }, async (_, c) => {
  const out = [];
  for (let r = 0; r < R; ++r) out.push(await one(c * R + r));
  return out;
}))).flat();
const wall = (performance.now() - start) / 1000;
const ttft = [], itl = [];
let tokens = 0;
for (const r of results) {
  tokens += r.tokens;
  if (r.times.length) ttft.push(r.times[0] - r.t0);
  for (let k = 1; k < r.times.length; ++k) itl.push(r.times[k] - r.times[k - 1]);
}
console.log(JSON.stringify({
  concurrency: C, requests: results.length, tokens, wall_s: +wall.toFixed(2),
  tokens_per_s: +(tokens / wall).toFixed(2),
  ttft_p50_ms: +pct(ttft, 0.5).toFixed(1), ttft_p99_ms: +pct(ttft, 0.99).toFixed(1),
  itl_p50_ms: +pct(itl, 0.5).toFixed(1), itl_p99_ms: +pct(itl, 0.99).toFixed(1),
}));
