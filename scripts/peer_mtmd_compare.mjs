// One table row comparing splitdec with llama.cpp's libmtmd on the same
// GGUF pair and media (scripts/peer_llama_mmproj*.sh):
//   node peer_mtmd_compare.mjs WORK SOFT_PIECES LABEL...
// WORK holds llama.json (scripts/llama_mtmd_driver.cpp's output), and
// splitdec's ids.json (tokenize), rows.npy (embed-media), generate.txt and
// steps.npy (generate --step-logits). SOFT_PIECES: the media soft-token
// pieces, comma-separated (each counts as -1, as the driver writes them).
// Prints: | LABEL... | prompt ids equal | rows max abs diff (rel RMS) |
// greedy tokens equal | max log-prob diff |
import fs from "node:fs";
const [work, softPieces, ...labels] = process.argv.slice(2);
const npy = (p) => {  // float32, C order
  const b = fs.readFileSync(p), header = b.readUInt16LE(8);
  return new Float32Array(b.buffer.slice(b.byteOffset + 10 + header, b.byteOffset + b.length));
};
const soft = new Set(softPieces.split(","));
const theirs = JSON.parse(fs.readFileSync(`${work}/llama.json`));
const ours = JSON.parse(fs.readFileSync(`${work}/ids.json`));
const ids = ours.tokens.map((t, i) => (soft.has(ours.pieces[i]) ? -1 : t));
const idsEqual = JSON.stringify(ids) === JSON.stringify(theirs.tokens);
const rows = npy(`${work}/rows.npy`), theirRows = theirs.image_rows.flat();
let worst = 0, num = 0, den = 0;
for (let k = 0; k < rows.length; ++k) {
  const d = rows[k] - theirRows[k];
  worst = Math.max(worst, Math.abs(d)), num += d * d, den += theirRows[k] * theirRows[k];
}
const sizeOk = rows.length === theirRows.length;
const text = fs.readFileSync(`${work}/generate.txt`, "utf8");
const match = text.match(/\[0\] tokens: (.*)/);
const ourTokens = match ? match[1].trim().split(/\s+/).map(Number) : [];
let lpWorst = NaN;
if (match) {
  const logits = npy(`${work}/steps.npy`), V = logits.length / ourTokens.length;
  lpWorst = 0;
  theirs.steps.forEach((s, i) => {
    const l = logits.subarray(i * V, (i + 1) * V);
    let top = -Infinity, sum = 0;
    for (const x of l) top = Math.max(top, x);
    for (const x of l) sum += Math.exp(x - top);
    for (const [id, lp] of Object.entries(s.logprobs)) lpWorst = Math.max(lpWorst, Math.abs(l[+id] - top - Math.log(sum) - lp));
  });
}
const theirTokens = theirs.steps.map((s) => s.token);
const tokensEqual = JSON.stringify(ourTokens) === JSON.stringify(theirTokens);
console.log(`| ${labels.join(" | ")} | ${idsEqual ? "yes" : `NO (${ids.length} / ${theirs.tokens.length})`} | ` +
  `${sizeOk ? `${worst.toExponential(1)} (${Math.sqrt(num / den).toExponential(1)})` : `SIZE ${rows.length} / ${theirRows.length}`} | ` +
  `${tokensEqual ? "yes" : `NO (${ourTokens} / ${theirTokens})`} | ${lpWorst.toExponential(1)} |`);
