// Second implementation for differential tests: encodes with @lenml/tokenizers (a transformers.js fork) installed by
// tools/fetch-test-assets.sh. usage: node js_reference_encoder.cjs ASSETS_DIR < strings.jsonl > ids.jsonl
// Each input line is a JSON string; each output line is the JSON array of its ids.
const fs = require("fs");
const path = require("path");
const readline = require("readline");

const assets = path.resolve(process.argv[2]);
const { TokenizerLoader } = require(path.join(assets, "node/node_modules/@lenml/tokenizers"));
const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(assets, "qwen3-tokenizer/tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(assets, "qwen3-tokenizer/tokenizer_config.json"), "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

const out = [];
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.length === 0) return;
  out.push(JSON.stringify(tokenizer.encode(JSON.parse(line), { add_special_tokens: false })));
});
lines.on("close", () => process.stdout.write(out.join("\n") + (out.length ? "\n" : "")));
