// The official OpenAI client against a running `splitdec serve`:
//   node openai_client.mjs BASE_URL API_KEY [PNG]
// Non-streamed and streamed chat (greedy: the same text both ways), n = 3, a
// completion (and its echo), the model list and one model by id, logit_bias
// and the penalties, a multi-turn chat about the PNG whose later turns find
// the earlier ones in the prefix cache, and refused requests. Prints one
// JSON line with what it saw; exits 1 on the first mismatch.
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, apiKey, png] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const fail = (why) => {
  console.error("FAIL: " + why);
  process.exit(1);
};

const models = await client.models.list();
const modelId = models.data[0]?.id;
if (!modelId) fail("no model listed");

const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say something about the sea." },
];
const whole = await client.chat.completions.create({ model: modelId, messages, temperature: 0, max_tokens: 12 });
const choice = whole.choices[0];
if (whole.object !== "chat.completion") fail("object " + whole.object);
if (!["stop", "length"].includes(choice.finish_reason)) fail("finish_reason " + choice.finish_reason);
if (whole.usage.completion_tokens < 1 || whole.usage.prompt_tokens < 1) fail("usage " + JSON.stringify(whole.usage));

const stream = await client.chat.completions.create({
  model: modelId, messages, temperature: 0, max_tokens: 12, stream: true, stream_options: { include_usage: true },
});
let streamed = "", finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  ++chunks;
  if (chunk.usage) usage = chunk.usage;
  const c = chunk.choices[0];
  if (!c) continue;
  if (c.delta?.content) streamed += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
}
if (streamed !== choice.message.content) fail(`streamed ${JSON.stringify(streamed)} != ${JSON.stringify(choice.message.content)}`);
if (finish !== choice.finish_reason) fail("stream finish_reason " + finish);
if (!usage || usage.completion_tokens !== whole.usage.completion_tokens) fail("stream usage " + JSON.stringify(usage));

// n choices: greedy, every one is the n = 1 reply; the prompt counted once.
const three = await client.chat.completions.create({ model: modelId, messages, temperature: 0, max_tokens: 12, n: 3 });
if (three.choices.length !== 3 || three.choices.some((c, i) => c.index !== i || c.message.content !== choice.message.content))
  fail("n: 3 gave " + JSON.stringify(three.choices));
if (three.usage.prompt_tokens !== whole.usage.prompt_tokens || three.usage.completion_tokens !== 3 * whole.usage.completion_tokens)
  fail("n: 3 usage " + JSON.stringify(three.usage));

const completion = await client.completions.create({ model: modelId, prompt: "The sea", temperature: 0, max_tokens: 6 });
if (completion.object !== "text_completion" || typeof completion.choices[0].text !== "string") fail("completion " + JSON.stringify(completion));

// A model by id, and one that is not served (a 404 the client raises as NotFoundError).
const retrieved = await client.models.retrieve(modelId);
if (retrieved.id !== modelId || retrieved.object !== "model") fail("models.retrieve " + JSON.stringify(retrieved));
let missing = null;
try {
  await client.models.retrieve("no-such-model");
} catch (e) {
  missing = e.status;
}
if (missing !== 404) fail("models.retrieve of an unknown id gave " + missing);

// echo: the prompt's text first; logit_bias and the penalties as the client sends them.
const echoed = await client.completions.create({ model: modelId, prompt: "The sea", temperature: 0, max_tokens: 6, echo: true });
if (echoed.choices[0].text !== "The sea" + completion.choices[0].text) fail("echo " + JSON.stringify(echoed.choices[0].text));
const penalised = await client.chat.completions.create({
  model: modelId, messages, temperature: 0, max_tokens: 12, presence_penalty: 0, frequency_penalty: 0, logit_bias: {},
});
if (penalised.choices[0].message.content !== choice.message.content) fail("zero penalties changed the reply");
// logprobs: one entry per token of the reply, the greedy token its own first alternative.
const withLogprobs = await client.chat.completions.create({ model: modelId, messages, temperature: 0, max_tokens: 6, logprobs: true, top_logprobs: 2 });
const entries = withLogprobs.choices[0].logprobs?.content ?? [];
if (entries.length === 0 || entries.some((e) => !(e.logprob <= 0) || e.top_logprobs.length !== 2 || e.top_logprobs[0].token !== e.token))
  fail("logprobs " + JSON.stringify(withLogprobs.choices[0].logprobs));
if (entries.map((e) => e.token).join("") !== withLogprobs.choices[0].message.content) fail("logprobs tokens do not spell the reply");
let badBias = null;
try {
  await client.chat.completions.create({ model: modelId, messages, max_tokens: 2, logit_bias: { "5": 150 } });
} catch (e) {
  badBias = { status: e.status, param: e.param };
}
if (!badBias || badBias.status !== 400 || badBias.param !== "logit_bias") fail("logit_bias 150 was not refused: " + JSON.stringify(badBias));

// A chat as the client keeps it: each turn resends the earlier turns and
// replies; from turn 2 on, everything the previous turn held (its prompt,
// the image in it included) is reused, never prefilled again.
const cachedPerTurn = [];
if (png) {
  const image = "data:image/png;base64," + readFileSync(png).toString("base64");
  const chat = [{ role: "user", content: [{ type: "image_url", image_url: { url: image } }, { type: "text", text: "What is this?" }] }];
  let previousPrompt = 0;
  for (const question of ["And the colours?", "Say it once more."]) {
    const reply = await client.chat.completions.create({ model: modelId, messages: chat, temperature: 0, max_tokens: 6 });
    const cached = reply.usage.prompt_tokens_details?.cached_tokens;
    if (typeof cached !== "number") fail("no usage.prompt_tokens_details.cached_tokens: " + JSON.stringify(reply.usage));
    if (previousPrompt > 0 && (cached < previousPrompt - 2 || cached >= reply.usage.prompt_tokens))
      fail(`turn ${cachedPerTurn.length + 1}: ${cached} cached of ${reply.usage.prompt_tokens}, the previous turn had ${previousPrompt}`);
    cachedPerTurn.push(cached);
    previousPrompt = reply.usage.prompt_tokens;
    chat.push({ role: "assistant", content: reply.choices[0].message.content }, { role: "user", content: question });
  }
}

let refused = null;
try {
  await client.chat.completions.create({ model: modelId, messages: [{ role: "robot", content: "hi" }] });
} catch (e) {
  refused = { status: e.status, message: e.message };
}
if (!refused || refused.status !== 400) fail("an unknown role was not refused with 400: " + JSON.stringify(refused));

console.log(JSON.stringify({ model: modelId, text: choice.message.content, chunks, finish, completion: completion.choices[0].text, cachedPerTurn, refused }));
