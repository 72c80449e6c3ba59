// Runs one media graph of an exported package (vision.onnx, speech.onnx)
// through ONNX Runtime on inputs read from .npy files, and writes each
// output as a .npy file.
//
//   node run_media_graph.mjs GRAPH.onnx OUT_DIR NAME=FILE.npy [NAME=FILE.npy ...]
//
// Inputs: float32 ('<f4') or int64 ('<i8') arrays in C order, bound to the
// graph input NAME. Outputs: OUT_DIR/<output name>.npy, float32. Prints one
// JSON line on stdout: {"ort_version", "outputs": {name: shape}}, or
// {"error": message} (exit 1).
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';

function fail(message) {
  process.stdout.write(JSON.stringify({ error: message }) + '\n');
  process.exit(1);
}

// The header dict of a .npy file: descr, fortran_order, shape.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') fail(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLength = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLength);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || !fortran || shapeText === undefined) fail(`${file}: unreadable .npy header ${header}`);
  if (fortran === 'True') fail(`${file}: Fortran-order arrays are not supported`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s.length > 0).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const data = buf.subarray(start + headerLength);
  const bytes = new Uint8Array(data.length);
  bytes.set(data);  // a copy: typed arrays need an aligned offset
  if (descr === '<f4') {
    if (bytes.length !== count * 4) fail(`${file}: ${bytes.length} data bytes for shape [${shape}] of float32`);
    return new ort.Tensor('float32', new Float32Array(bytes.buffer, 0, count), shape);
  }
  if (descr === '<i8') {
    if (bytes.length !== count * 8) fail(`${file}: ${bytes.length} data bytes for shape [${shape}] of int64`);
    return new ort.Tensor('int64', new BigInt64Array(bytes.buffer, 0, count), shape);
  }
  fail(`${file}: dtype ${descr} is not supported (float32 '<f4' and int64 '<i8' are)`);
}

function writeNpy(file, tensor) {
  if (tensor.type !== 'float32') fail(`output ${file}: type ${tensor.type}, float32 expected`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const prefix = Buffer.alloc(10);
  prefix[0] = 0x93;
  prefix.write('NUMPY', 1, 'latin1');
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [graph, outDir, ...bindings] = process.argv.slice(2);
  if (!graph || !outDir || bindings.length === 0) fail('usage: run_media_graph.mjs GRAPH.onnx OUT_DIR NAME=FILE.npy ...');
  const feeds = {};
  for (const b of bindings) {
    const eq = b.indexOf('=');
    if (eq <= 0) fail(`binding '${b}' is not NAME=FILE.npy`);
    feeds[b.slice(0, eq)] = readNpy(b.slice(eq + 1));
  }
  const opts = { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 2 };
  let session;
  try {
    session = await ort.InferenceSession.create(graph, opts);
  } catch (e) {
    fail(`cannot load ${graph}: ${e.message}`);
  }
  for (const name of session.inputNames) if (!(name in feeds)) fail(`graph input '${name}' has no .npy file`);
  for (const name of Object.keys(feeds)) if (!session.inputNames.includes(name)) fail(`'${name}' is not an input of ${graph}`);
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    fail(`running ${graph}: ${e.message}`);
  }
  fs.mkdirSync(outDir, { recursive: true });
  const outputs = {};
  for (const name of session.outputNames) {
    writeNpy(path.join(outDir, `${name}.npy`), results[name]);
    outputs[name] = results[name].dims;
  }
  process.stdout.write(JSON.stringify({ ort_version: ort.env.versions?.common ?? 'unknown', outputs }) + '\n');
}

main().catch((e) => fail(e.stack ?? String(e)));
