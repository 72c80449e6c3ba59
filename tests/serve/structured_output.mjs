// Structured output through the official OpenAI client against a running
// `splitdec serve`, each reply validated by ajv (a JSON Schema validator
// from npm, independent of splitdec):
//   node structured_output.mjs BASE_URL
// A corpus of schemas under several sampler settings, json_object mode,
// a streamed reply, and schemas the server must refuse with a 400 naming
// the keyword. Prints one JSON line with the counts; exits 1 on the first
// invalid reply.
import Ajv from "ajv";
import OpenAI from "openai";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const ajv = new Ajv({ strict: false });
const fail = (why) => {
  console.error("FAIL: " + why);
  process.exit(1);
};

const schemas = {
  person: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 12 },
      age: { type: "integer" },
      email: { type: ["string", "null"] },
      tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
    },
    required: ["name", "age"],
    additionalProperties: false,
  },
  enums: {
    type: "object",
    properties: {
      color: { enum: ["red", "green", "blue"] },
      size: { enum: [1, 2.5, null, true] },
      version: { const: "v1" },
    },
    required: ["color", "size", "version"],
  },
  nested: {
    type: "object",
    properties: {
      items: {
        type: "array",
        minItems: 1,
        maxItems: 2,
        items: { type: "object", properties: { id: { type: "integer" }, ok: { type: "boolean" } }, required: ["id", "ok"] },
      },
    },
    required: ["items"],
  },
  recursive: {
    $defs: {
      node: {
        type: "object",
        properties: { v: { type: "number" }, kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 } },
        required: ["v"],
      },
    },
    $ref: "#/$defs/node",
  },
  either: {
    anyOf: [
      { type: "object", properties: { kind: { const: "circle" }, r: { type: "number" } }, required: ["kind", "r"] },
      { type: "object", properties: { kind: { const: "square" }, side: { type: "integer" } }, required: ["kind", "side"] },
    ],
  },
  map: { type: "object", additionalProperties: { type: "integer" } },
  list: { type: "array", items: { type: "boolean" }, minItems: 2, maxItems: 4 },
  scalar: { type: "string", maxLength: 10 },
};
const samplers = [
  { temperature: 0 },
  { temperature: 1.5, seed: 1 },
  { temperature: 1, top_p: 0.5, seed: 2 },
  { temperature: 0.8, top_k: 5, seed: 3 },
  { temperature: 1, presence_penalty: 2, frequency_penalty: 1, seed: 4 },
];
const messages = [{ role: "user", content: "Answer in JSON." }];
let valid = 0, cut = 0;

for (const [name, schema] of Object.entries(schemas)) {
  const check = ajv.compile(schema);
  for (const sampler of samplers) {
    const r = await client.chat.completions.create({
      model: "m", messages, max_tokens: 300, ...sampler,
      response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
    });
    const c = r.choices[0];
    if (c.finish_reason === "length") {
      ++cut;  // max_tokens ran out mid-document, as OpenAI's replies do
      continue;
    }
    let doc;
    try {
      doc = JSON.parse(c.message.content);
    } catch (e) {
      fail(`${name} ${JSON.stringify(sampler)}: not JSON: ${JSON.stringify(c.message.content)}`);
    }
    if (!check(doc)) fail(`${name} ${JSON.stringify(sampler)}: ${ajv.errorsText(check.errors)} in ${c.message.content}`);
    ++valid;
  }
}

// json_object: any JSON object.
for (const sampler of samplers) {
  const r = await client.chat.completions.create({ model: "m", messages, max_tokens: 300, ...sampler, response_format: { type: "json_object" } });
  const c = r.choices[0];
  if (c.finish_reason === "length") { ++cut; continue; }
  const doc = JSON.parse(c.message.content);
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) fail("json_object gave " + c.message.content);
  ++valid;
}

// Streamed: the deltas add up to the same document as the whole reply.
const format = { type: "json_schema", json_schema: { name: "person", schema: schemas.person } };
const whole = await client.chat.completions.create({ model: "m", messages, max_tokens: 300, temperature: 0, response_format: format });
let streamed = "";
for await (const chunk of await client.chat.completions.create({
  model: "m", messages, max_tokens: 300, temperature: 0, response_format: format, stream: true,
})) streamed += chunk.choices[0]?.delta?.content ?? "";
if (streamed !== whole.choices[0].message.content) fail(`streamed ${streamed} != ${whole.choices[0].message.content}`);

// Refused: what the server cannot enforce is a 400 naming it, not ignored.
const refused = [
  [{ type: "integer", minimum: 3 }, "minimum"],
  [{ type: "string", pattern: "^a+$" }, "pattern"],
  [{ $ref: "#/$defs/nowhere" }, "points at nothing"],
];
for (const [schema, word] of refused) {
  let status = 0, message = "", param = "";
  try {
    await client.chat.completions.create({
      model: "m", messages, max_tokens: 5, response_format: { type: "json_schema", json_schema: { name: "x", schema } },
    });
  } catch (e) {
    status = e.status;
    message = e.error?.message ?? e.message;
    param = e.error?.param ?? e.param;
  }
  if (status !== 400 || !message.includes(word) || param !== "response_format")
    fail(`schema ${JSON.stringify(schema)} gave ${status} ${param} ${message}`);
}
console.log(JSON.stringify({ valid, cut }));
