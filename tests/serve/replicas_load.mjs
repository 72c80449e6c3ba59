// Multi-turn chats against `splitdec serve` replicas behind HAProxy
// (tests/serve/replicas_haproxy_test.sh). Node's own fetch, no retries: every
// error the load balancer lets through is seen.
//
//   node replicas_load.mjs reference URL REFS.json
//     runs every scripted conversation against one server, turn by turn, and
//     writes each turn's greedy reply: the answers every later phase must
//     give (each turn's history holds these replies, so every request body
//     is fixed).
//   node replicas_load.mjs affinity URL REFS.json N
//     runs the conversations at once through the balancer: every reply is the
//     reference's, every turn of a conversation lands on the replica of its
//     first turn (X-Splitdec-Replica) and finds its past there
//     (cached_tokens), all N replicas take some.
//   node replicas_load.mjs fault URL REFS.json RUN_DIR STATS_URL REPLICA SIGNAL
//     keeps WORKERS chats going (every third turn streamed) and, KILL_AT_MS
//     in, sends SIGNAL (SIGKILL or SIGTERM) to replica REPLICA (its pid from
//     RUN_DIR/replicaR.pid); the supervisor starts it again. Every reply
//     that comes back is the reference's; SIGKILL: a request that fails was
//     in flight when the replica died; SIGTERM (a drain): none fails.
//     Requests begun once HAProxy saw the replica up again all succeed, and
//     some land on it.
// Prints one JSON line with what it saw; exits 1 with "FAIL: ..." otherwise.
import { readFileSync, writeFileSync } from "node:fs";

const [mode, url, refsPath, ...rest] = process.argv.slice(2);
const fail = (why) => {
  console.error("FAIL: " + why);
  process.exit(1);
};
const env = (name, dflt) => Number(process.env[name] ?? dflt);
const MAX_TOKENS = env("MAX_TOKENS", 48);
const REQUEST_TIMEOUT_MS = env("REQUEST_TIMEOUT_MS", 30000);

// The scripted conversations: distinct first messages (their hash picks the
// replica), half of them with a system message.
const CONVERSATIONS = env("CONVERSATIONS", 8), TURNS = env("TURNS", 4);
const topics = ["the sea", "mountains", "bread", "trains", "owls", "copper", "rain", "chess", "tea", "glass", "bees", "maps"];
function userMessage(c, t) {
  return `Chat ${c}, turn ${t}: tell me one thing about ${topics[(c * 5 + t) % topics.length]} (${c * 31 + t * 7}).`;
}
function requestBody(c, t, refs, stream) {
  const messages = [];
  if (c % 2 === 0) messages.push({ role: "system", content: `You are assistant ${c}. Be brief.` });
  for (let k = 0; k <= t; ++k) {
    messages.push({ role: "user", content: userMessage(c, k) });
    if (k < t) messages.push({ role: "assistant", content: refs[c][k] });
  }
  const body = { model: "m", messages, max_tokens: MAX_TOKENS, temperature: 0 };
  if (stream) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  return body;
}

// One request; never throws. ok: a whole reply (status 200 and, streamed,
// a finish_reason and [DONE]).
async function send(body) {
  const r = { start: performance.now(), ok: false, stream: !!body.stream };
  try {
    const res = await fetch(url + "/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    r.status = res.status;
    r.replica = res.headers.get("x-splitdec-replica");
    const text = await res.text();
    if (res.status !== 200) {
      r.error = `status ${res.status}: ${text.slice(0, 200)}`;
    } else if (!body.stream) {
      const j = JSON.parse(text);
      r.text = j.choices[0].message.content;
      r.usage = j.usage;
      r.ok = true;
    } else {
      let content = "", finish = null, done = false;
      for (const line of text.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6).trim();
        if (data === "[DONE]") { done = true; continue; }
        const j = JSON.parse(data);
        if (j.usage) r.usage = j.usage;
        const ch = j.choices?.[0];
        if (ch?.delta?.content) content += ch.delta.content;
        if (ch?.finish_reason) finish = ch.finish_reason;
      }
      r.text = content;
      if (done && finish) r.ok = true;
      else r.error = `stream cut (finish ${finish}, [DONE] ${done})`;
    }
  } catch (e) {
    r.error = `${e.name}: ${e.message}${e.cause ? " (" + e.cause.message + ")" : ""}`;
  }
  r.end = performance.now();
  return r;
}

const sleep = (ms) => new Promise((f) => setTimeout(f, ms));
const cached = (r) => r.usage?.prompt_tokens_details?.cached_tokens ?? 0;

if (mode === "reference") {
  const refs = Array.from({ length: CONVERSATIONS }, () => []);
  await Promise.all(refs.map(async (_, c) => {
    for (let t = 0; t < TURNS; ++t) {
      const r = await send(requestBody(c, t, refs, false));
      if (!r.ok) fail(`reference chat ${c} turn ${t}: ${r.error}`);
      refs[c].push(r.text);
    }
  }));
  const distinct = new Set(refs.flat()).size;
  if (distinct < CONVERSATIONS) fail(`only ${distinct} distinct replies: too few to tell a wrong one`);
  writeFileSync(refsPath, JSON.stringify(refs));
  console.log(JSON.stringify({ mode, conversations: CONVERSATIONS, turns: TURNS, distinct_replies: distinct }));
  process.exit(0);
}

const refs = JSON.parse(readFileSync(refsPath, "utf8"));
const check = (r, c, t, what) => {
  if (r.ok && r.text !== refs[c][t])
    fail(`${what}: chat ${c} turn ${t} on ${r.replica}: WRONG reply ${JSON.stringify(r.text)}, reference ${JSON.stringify(refs[c][t])}`);
};

if (mode === "affinity") {
  const replicas = Number(rest[0]);
  const placement = [];
  let hits = 0, cachedTokens = 0;
  await Promise.all(refs.map(async (_, c) => {
    let first = null, prevPrompt = 0;
    for (let t = 0; t < TURNS; ++t) {
      const r = await send(requestBody(c, t, refs, t % 2 === 1));
      if (!r.ok) fail(`affinity: chat ${c} turn ${t}: ${r.error}`);
      check(r, c, t, "affinity");
      if (!r.replica) fail("no X-Splitdec-Replica header");
      if (t === 0) first = r.replica;
      else if (r.replica !== first) fail(`affinity: chat ${c} turn ${t} went to ${r.replica}, turn 0 to ${first}`);
      // Turn t's prompt starts with turn t-1's, which the replica holds
      // (a few tokens may be tokenized differently where the reply joins).
      if (t > 0 && cached(r) < prevPrompt - 4)
        fail(`affinity: chat ${c} turn ${t} reused ${cached(r)} tokens, turn ${t - 1}'s prompt had ${prevPrompt}`);
      if (t > 0) { ++hits; cachedTokens += cached(r); }
      prevPrompt = r.usage.prompt_tokens;
    }
    placement[c] = first;
  }));
  const used = new Set(placement);
  if (used.size !== replicas) fail(`affinity: conversations landed on ${[...used]} only, not on all ${replicas} replicas`);
  const perReplica = {};
  for (const p of placement) perReplica[p] = (perReplica[p] ?? 0) + 1;
  console.log(JSON.stringify({ mode, requests: CONVERSATIONS * TURNS, conversations_per_replica: perReplica,
                               later_turns_with_cache: hits, cached_tokens: cachedTokens, placement }));
  process.exit(0);
}

if (mode === "fault") {
  const [runDir, statsUrl, replica, signal] = rest;
  const WORKERS = env("WORKERS", 6), KILL_AT_MS = env("KILL_AT_MS", 1500), AFTER_UP_MS = env("AFTER_UP_MS", 1500);
  const UP_TIMEOUT_MS = env("UP_TIMEOUT_MS", 30000);
  const name = `r${replica}`;
  const pidFile = `${runDir}/replica${replica}.pid`;
  const serverState = async () => {
    try {
      const csv = await (await fetch(statsUrl + ";csv", { signal: AbortSignal.timeout(2000) })).text();
      for (const line of csv.split("\n")) {
        const f = line.split(",");
        if (f[0] === "splitdec" && f[1] === name) return f[17];
      }
    } catch {}
    return "?";
  };
  const t0 = performance.now();
  let stop = false;
  const results = [];
  const worker = async (w) => {
    for (let k = 0; !stop; ++k) {
      const c = (w + k * WORKERS) % CONVERSATIONS;
      for (let t = 0; t < TURNS && !stop; ++t) {
        const r = await send(requestBody(c, t, refs, (c + t) % 3 === 0));
        Object.assign(r, { c, t });
        check(r, c, t, "fault");
        results.push(r);
      }
    }
  };
  const injector = async () => {
    await sleep(KILL_AT_MS);
    const oldPid = Number(readFileSync(pidFile, "utf8"));
    const killAt = performance.now();
    process.kill(oldPid, signal);
    // Gone (its pid file rewritten by the supervisor), then up again in
    // HAProxy's eyes.
    let downSeen = false, upAt = null;
    while (performance.now() - killAt < UP_TIMEOUT_MS) {
      const pidNow = Number(readFileSync(pidFile, "utf8"));
      const state = await serverState();
      if (state.startsWith("DOWN") || state.startsWith("MAINT") || state.startsWith("NOLB")) downSeen = true;
      if (pidNow !== oldPid && downSeen && state === "UP") { upAt = performance.now(); break; }
      await sleep(50);
    }
    if (upAt === null) { stop = true; fail(`${name} not up again ${UP_TIMEOUT_MS} ms after ${signal}`); }
    await sleep(AFTER_UP_MS);
    stop = true;
    return { oldPid, killAt, upAt };
  };
  const [inj] = await Promise.all([injector(), ...Array.from({ length: WORKERS }, (_, w) => worker(w))]);
  const { killAt, upAt } = inj;
  const inFlight = (r) => r.start < killAt && r.end > killAt;
  const failed = results.filter((r) => !r.ok);
  const beforeKill = results.filter((r) => r.end < killAt && r.replica === name).length;
  const afterUp = results.filter((r) => r.start > upAt);
  const afterUpOnIt = afterUp.filter((r) => r.replica === name).length;
  const summary = {
    mode, signal, replica: name, requests: results.length, ok: results.length - failed.length,
    failed: failed.length, streamed: results.filter((r) => r.stream).length,
    in_flight_at_kill_any_replica: results.filter(inFlight).length, served_by_it_before: beforeKill,
    after_up: afterUp.length, after_up_on_it: afterUpOnIt,
    kill_at_ms: Math.round(killAt - t0), up_again_after_ms: Math.round(upAt - killAt),
    errors: failed.slice(0, 5).map((r) => `${r.stream ? "stream " : ""}${r.error}`),
  };
  console.log(JSON.stringify(summary));
  if (beforeKill === 0) fail(`${name} served nothing before the ${signal}: the test did not load it`);
  if (signal === "SIGTERM" && failed.length) fail(`a drain lost ${failed.length} requests`);
  const strays = failed.filter((r) => !inFlight(r) || (r.replica && r.replica !== name));
  if (strays.length) fail(`${strays.length} requests failed that were not in flight on ${name} at the kill: ${strays[0].error}`);
  if (afterUp.some((r) => !r.ok)) fail("a request failed after the replica was up again");
  if (afterUpOnIt === 0) fail(`nothing went to ${name} once it was up again`);
  process.exit(0);
}

fail(`unknown mode ${mode}`);
