// The reference Jinja engine for test_chat_template: renders templates with
// @huggingface/jinja (transformers.js' engine, which sets trim_blocks and
// lstrip_blocks as Python transformers does). Reads a JSON array of
// {template, context} from the file named by argv[2] and prints a JSON array
// of {output} or {error} in the same order.
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = cases.map(({ template, context }) => {
  try {
    return { output: new Template(template).render(context) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify(results));
