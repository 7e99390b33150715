// The tiktoken reference of bench/data.sh (NODE_PATH: tests/parity's npm packages). `ranks OUT` writes
// the gpt2 rank file from the npm package; `encode TEXT` times tiktoken's WASM encode_ordinary over each
// non-blank line of TEXT (the documents of `dtrain data prepare --docs-by line`), the text read first,
// and prints one JSON line: bytes, lines, tokens, seconds (wall), cpu_s (the process's CPU time), mb_per_s.
"use strict";
const fs = require("fs");
const path = require("path");
const { encodingNamed, writeRankFile } = require(path.join(__dirname, "../tests/parity/tokenizer_references.cjs"));

function encode(file) {
  const data = fs.readFileSync(file);
  const lines = data.toString("utf8").split("\n").filter((l) => l.trim() !== "");
  const { encoder } = encodingNamed("gpt2");
  const start = process.hrtime.bigint(), cpu = process.cpuUsage();
  let tokens = 0;
  for (const line of lines) tokens += encoder.encode_ordinary(line).length;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9, used = process.cpuUsage(cpu);
  encoder.free();
  console.log(JSON.stringify({ bytes: data.length, lines: lines.length, tokens, seconds,
                               cpu_s: (used.user + used.system) / 1e6, mb_per_s: data.length / 1e6 / seconds }));
}

const [mode, arg] = process.argv.slice(2);
if (mode === "ranks") writeRankFile(arg, encodingNamed("gpt2").tokens);
else if (mode === "encode") encode(arg);
else throw new Error("usage: node data_ref_tiktoken.cjs ranks OUT | encode TEXT");
