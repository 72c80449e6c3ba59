#!/usr/bin/env bash
# n choices in one request (the prompt prefilled once, its KV copied to a
# slot per choice) against the same n as separate concurrent requests (each
# prefills the prompt itself: the prefix cache keeps a request's KV only once
# it ends), on a ~1300-token chat prompt, 8 sampled tokens per choice.
#   scripts/bench_n_choices.sh MODEL [N] [ROUNDS]     (BUILD=build THREADS=2)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$1"; n="${2:-4}"; rounds="${3:-3}"
bin="$root/${BUILD:-build}/splitdec"
log="$(mktemp)"
"$bin" serve --model "$model" --port 0 -c 2048 --max-sequences "$n" -t "${THREADS:-2}" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do grep -q 'on http' "$log" && break; sleep 0.5; done
url=$(grep -o 'http://[0-9.:]*' "$log" | head -1)
node - "$url" "$n" "$rounds" <<'JS'
const [base, n, rounds] = [process.argv[2], +process.argv[3], +process.argv[4]];
const words = (seed) => Array.from({ length: 700 }, (_, i) => ["sea", "wave", "sand", "wind", "shell", "tide"][(i * 7 + seed) % 6]).join(" ");
const post = (body) => fetch(base + "/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify(body) }).then((r) => r.json());
const messages = (seed) => [{ role: "user", content: `Round ${seed}: ` + words(seed) }];
console.log(`| round | n=${n} in one request, ms | ${n} requests of n=1, ms | ratio |`);
console.log("|---|---|---|---|");
for (let round = 0; round < rounds; ++round) {
  let t0 = performance.now();
  const one = await post({ messages: messages(100 + round), max_tokens: 8, temperature: 0.8, seed: 1, n });
  const together = performance.now() - t0;
  t0 = performance.now();
  await Promise.all(Array.from({ length: n }, (_, i) => post({ messages: messages(200 + round), max_tokens: 8, temperature: 0.8, seed: 1 + i })));
  const apart = performance.now() - t0;
  if (one.choices?.length !== n) throw new Error(JSON.stringify(one).slice(0, 300));
  console.log(`| ${round} | ${together.toFixed(0)} (prompt ${one.usage.prompt_tokens}) | ${apart.toFixed(0)} | ${(apart / together).toFixed(2)}x |`);
}
JS
