// Load generator for scripts/media_beside_stream.sh (Node >= 18, no packages):
//   node media_beside_stream.mjs BASE_URL IMAGE.png MAX_TOKENS
// Runs one greedy streamed text request alone, then the same request again
// with an image request sent once its first token has arrived. Prints one
// JSON line: the stream's p50 / p90 inter-token latency alone and while the
// image request was in flight (ms), and the image request's seconds.
import { readFileSync } from "node:fs";
const [base, imagePath, maxTokens] = process.argv.slice(2);
const image = "data:image/png;base64," + readFileSync(imagePath).toString("base64");

async function post(body) {
  const res = await fetch(base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error("HTTP " + res.status + " " + (await res.text()));
  return res;
}

// The content events' arrival times; `onFirst` runs at the first one.
async function stream(onFirst) {
  const res = await post({
    messages: [{ role: "user", content: "Write about the sea and the sky." }],
    temperature: 0, max_tokens: Number(maxTokens), stream: true,
  });
  const times = [];
  let buf = "";
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buf += decoder.decode(bytes, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      if (JSON.parse(ev.slice(6)).choices?.[0]?.delta?.content) {
        times.push(performance.now());
        if (times.length === 1 && onFirst) onFirst();
      }
    }
  }
  return times;
}

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(1);
};
const gaps = (times, from = -Infinity, to = Infinity) => {
  const out = [];
  for (let k = 1; k < times.length; ++k) if (times[k - 1] >= from && times[k] <= to) out.push(times[k] - times[k - 1]);
  return out;
};

const alone = gaps(await stream());
let imageStart = 0, imageEnd = Infinity, imageDone;
const times = await stream(() => {
  imageStart = performance.now();
  imageDone = post({
    messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: image } }, { type: "text", text: "What is this?" }] }],
    temperature: 0, max_tokens: 1,
  }).then(async (res) => { await res.text(); imageEnd = performance.now(); });
});
await imageDone;
const beside = gaps(times, imageStart, imageEnd);
console.log(JSON.stringify({
  alone_itl_p50_ms: pct(alone, 0.5), alone_itl_p90_ms: pct(alone, 0.9),
  beside_itl_p50_ms: pct(beside, 0.5), beside_itl_p90_ms: pct(beside, 0.9), beside_tokens: beside.length,
  ratio_p50: +(pct(beside, 0.5) / pct(alone, 0.5)).toFixed(2),
  image_request_s: +((imageEnd - imageStart) / 1000).toFixed(2),
}));
