// The bench's references: js-tiktoken (pure JavaScript) and tiktoken (Rust compiled to WASM)
// encoding one file, as the tokenizer oracle reads it. Prints one JSON line per encoding:
// {"encoding", "js_mb_s", "wasm_mb_s", "tokens"}; MB/s of the file's bytes, the median of `reps`
// timed passes after one untimed pass (the JIT and the WASM module warm).
// Usage: node reference_speed.mjs TOOLS_DIR FILE REPS ENCODING...
import fs from 'node:fs';
import { createRequire } from 'node:module';

const [tools, file, repsText, ...encodings] = process.argv.slice(2);
const require = createRequire(`${tools}/node_modules/`);
const { getEncoding } = require('js-tiktoken');
const { get_encoding } = require('tiktoken');
const bytes = fs.readFileSync(file);
const text = bytes.toString('utf8');
const reps = Number(repsText);

function mbPerS(encode) {
  encode();
  const times = [];
  for (let i = 0; i < reps; ++i) {
    const t0 = process.hrtime.bigint();
    encode();
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  times.sort((a, b) => a - b);
  return bytes.length / 1e6 / times[Math.floor(times.length / 2)];
}

for (const name of encodings) {
  const js = getEncoding(name);
  const wasm = get_encoding(name);
  const tokens = js.encode(text, [], []).length;
  const jsRate = mbPerS(() => js.encode(text, [], []));
  const wasmRate = mbPerS(() => wasm.encode_ordinary(text));
  wasm.free();
  console.log(JSON.stringify({ encoding: name, js_mb_s: jsRate, wasm_mb_s: wasmRate, tokens }));
}
