// The reference side of tests/e2e/test_tokenizer_parity.sh. Usage: node tokenizer_references.cjs
// OUT_DIR [TEXTS.json] (more texts to encode, a JSON array of strings: tests/parity/texts.py's).
// Writes into OUT_DIR:
//   gpt2.tiktoken, cl100k_base.tiktoken, o200k_base.tiktoken: tiktoken rank files of the encodings the
//     npm package `tiktoken` ships (taken from its encoder, nothing downloaded);
//   gpt2.tokenizer.json: a GPT-2-style tokenizer.json made from the gpt2 ranks (ByteLevel pre-tokenizer);
//   gpt2_prefix_space.tokenizer.json: the same with ByteLevel's add_prefix_space;
//   llama3_style.tokenizer.json: a Llama-3-style one made from cl100k_base (Sequence of Split by the
//     cl100k regex and ByteLevel without regex, ignore_merges, added tokens special and not);
//   references.json: {texts: [...], files: {FILE: {text: [ids per text], special: [ids per text],
//     decoded: [base64 per text]}}}: the ids of every parity text in both special-token modes by the
//     references, tiktoken (WASM) for the rank files and Hugging Face's tokenizers.js for the
//     tokenizer.json files, and the bytes the special mode's ids stand for (tiktoken's decode; the
//     tokenizer.json's vocabulary read back through the byte alphabet).
// Modes: `text` (a special token's spelling is plain text): tiktoken's encode_ordinary, and
// tokenizers.js on the file without its special added tokens (as Hugging Face's
// encode_special_tokens=True reads it); `special`: tiktoken's encode(text, "all"), tokenizers.js as is.
"use strict";
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");
const { Tokenizer } = require("@huggingface/tokenizers");
const { parityTexts } = require("./parity_texts.cjs");

// GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for themselves, the others for
// U+0100 onwards in byte order.
function byteAlphabet() {
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const table = [];
  let next = 256;
  for (let b = 0; b < 256; b++) table.push(String.fromCodePoint(printable(b) ? b : next++));
  return table;
}
const ALPHABET = byteAlphabet();
const alphabetText = (bytes) => Array.from(bytes, (b) => ALPHABET[b]).join("");

// A tiktoken encoding the package ships: its encoder, special tokens, regex and tokens by rank.
function encodingNamed(name) {
  const { special_tokens, pat_str } = require(`tiktoken/encoders/${name}.json`);
  const encoding = { name, encoder: get_encoding(name), specialTokens: special_tokens, pattern: pat_str };
  encoding.tokens = ranksOf(encoding);
  return encoding;
}

// The tokens of an encoding by rank, read back from the tiktoken encoder itself: each of its
// mergeable tokens (token_byte_values) and the rank the encoder gives it.
function ranksOf(encoding) {
  const tokens = [];
  for (const bytes of encoding.encoder.token_byte_values()) {
    tokens[encoding.encoder.encode_single_token(new Uint8Array(bytes))] = Buffer.from(bytes);
  }
  if (tokens.some((t) => t === undefined) || Object.keys(tokens).length !== tokens.length)
    throw new Error(`the ranks of ${encoding.name} do not run from 0 to n-1`);
  return tokens;
}

function writeRankFile(file, tokens) {
  const lines = tokens.map((bytes, rank) => `${bytes.toString("base64")} ${rank}\n`);
  fs.writeFileSync(file, lines.join(""));
}

// Hugging Face merges from tiktoken ranks: the merge that makes the token of rank r is the last step
// of merging its bytes with the ranks below r alone (tiktoken's own algorithm), which ends in two parts.
function mergesOf(tokens) {
  const rankOf = new Map(tokens.map((bytes, rank) => [bytes.toString("latin1"), rank]));
  const merges = [];
  tokens.forEach((bytes, rank) => {
    if (bytes.length < 2) return;
    let parts = Array.from(bytes, (b) => Buffer.from([b]));
    for (;;) {
      let best = -1;
      let bestRank = rank;
      for (let i = 0; i + 1 < parts.length; i++) {
        const r = rankOf.get(Buffer.concat([parts[i], parts[i + 1]]).toString("latin1"));
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
      }
      if (best < 0) break;
      parts.splice(best, 2, Buffer.concat([parts[best], parts[best + 1]]));
    }
    if (parts.length !== 2) throw new Error(`rank ${rank} does not split into two lower-ranked tokens`);
    merges.push([alphabetText(parts[0]), alphabetText(parts[1])]);
  });
  return merges;
}

function tokenizerJson({ tokens, merges, preTokenizer, addedTokens, ignoreMerges, stringMerges }) {
  const vocab = {};
  tokens.forEach((bytes, rank) => (vocab[alphabetText(bytes)] = rank));
  for (const t of addedTokens) if (t.in_vocab) vocab[t.content] = t.id;
  const added_tokens = addedTokens.map(({ id, content, special, lstrip = false, rstrip = false, normalized = !special }) => ({
    id, content, single_word: false, lstrip, rstrip, normalized, special,
  }));
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens,
    normalizer: null,
    pre_tokenizer: preTokenizer,
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges, vocab,
      merges: stringMerges ? merges.map(([a, b]) => `${a} ${b}`) : merges,
    },
  };
}

function jsonFiles(gpt2, cl100k) {
  const gpt2Tokens = gpt2.tokens;
  const gpt2Merges = mergesOf(gpt2Tokens);
  const byteLevel = (addPrefixSpace) => ({ type: "ByteLevel", add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: true });
  const endOfText = { id: 50256, content: "<|endoftext|>", special: true, in_vocab: true };
  const clTokens = cl100k.tokens;
  const llama3Added = [
    ...Object.entries(cl100k.specialTokens).map(([content, id]) => ({ id, content, special: true })),
    { id: 100300, content: "<|begin_of_text|>", special: true },
    { id: 100301, content: "<|end_of_text|>", special: true },
    { id: 100302, content: "<mask>", special: true, lstrip: true, rstrip: true },
    { id: 100303, content: "dtrain_added", special: false },
    // not normalized, so in the first pass with the special tokens: tokenizers.js has one pass when
    // there is no normalizer, Hugging Face's Rust (and dtrain) two, normalized tokens in the second
    { id: 100304, content: "<|endoftext|>ish", special: false, normalized: false },
  ];
  const split = { type: "Split", pattern: { Regex: cl100k.pattern }, behavior: "Isolated", invert: false };
  return {
    "gpt2.tokenizer.json": tokenizerJson({ tokens: gpt2Tokens, merges: gpt2Merges, preTokenizer: byteLevel(false),
                                           addedTokens: [endOfText], ignoreMerges: false, stringMerges: true }),
    "gpt2_prefix_space.tokenizer.json": tokenizerJson({ tokens: gpt2Tokens, merges: gpt2Merges,
                                                        preTokenizer: byteLevel(true), addedTokens: [endOfText],
                                                        ignoreMerges: false, stringMerges: false }),
    "llama3_style.tokenizer.json": tokenizerJson({
      tokens: clTokens, merges: mergesOf(clTokens), addedTokens: llama3Added, ignoreMerges: true, stringMerges: false,
      preTokenizer: { type: "Sequence", pretokenizers: [split, { type: "ByteLevel", add_prefix_space: false,
                                                                  trim_offsets: true, use_regex: false }] },
    }),
  };
}

// The bytes ids of a tokenizer.json stand for: an added token's text, or a vocabulary token's bytes
// read back through the byte alphabet (tokenizers.js's own decode would also tidy spaces).
function jsonDecoder(json) {
  const byteOf = new Map(ALPHABET.map((ch, b) => [ch, b]));
  const textOf = new Map(Object.entries(json.model.vocab).map(([text, id]) => [id, text]));
  const bytesOf = new Map([...textOf].map(([id, text]) => [id, Buffer.from(Array.from(text, (ch) => byteOf.get(ch)))]));
  for (const t of json.added_tokens) bytesOf.set(t.id, Buffer.from(t.content));
  return (ids) => Buffer.concat(ids.map((id) => bytesOf.get(id)));
}

const withoutSpecialAddedTokens = (json) => ({ ...json, added_tokens: json.added_tokens.filter((t) => !t.special) });

function main() {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node tokenizer_references.cjs OUT_DIR [TEXTS.json]");
  fs.mkdirSync(out, { recursive: true });
  const encodings = ["gpt2", "cl100k_base", "o200k_base"].map(encodingNamed);
  const texts = parityTexts();
  if (process.argv[3]) {
    const shared = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
    shared.forEach((text, i) => texts.push({ name: `texts.py #${i}`, text }));
  }
  const files = {};
  for (const { name, encoder, tokens } of encodings) {
    writeRankFile(path.join(out, `${name}.tiktoken`), tokens);
    files[`${name}.tiktoken`] = {
      text: texts.map((t) => Array.from(encoder.encode_ordinary(t.text))),
      special: texts.map((t) => Array.from(encoder.encode(t.text, "all"))),
    };
    files[`${name}.tiktoken`].decoded = files[`${name}.tiktoken`].special.map((ids) =>
      Buffer.from(encoder.decode(new Uint32Array(ids))).toString("base64"));
  }
  for (const [name, json] of Object.entries(jsonFiles(encodings[0], encodings[1]))) {
    fs.writeFileSync(path.join(out, name), JSON.stringify(json));
    const special = new Tokenizer(json, {});
    const plain = new Tokenizer(withoutSpecialAddedTokens(json), {});
    const ids = (tok, t) => (t.hf === false ? null : tok.encode(t.text, { add_special_tokens: false }).ids);
    files[name] = { text: texts.map((t) => ids(plain, t)), special: texts.map((t) => ids(special, t)) };
    const decode = jsonDecoder(json);
    files[name].decoded = files[name].special.map((x) => (x === null ? null : decode(x).toString("base64")));
  }
  for (const { encoder } of encodings) encoder.free();
  fs.writeFileSync(path.join(out, "references.json"), JSON.stringify({ texts, files }));
}

// bench/data_ref_tiktoken.cjs takes the encodings and rank files from here.
module.exports = { encodingNamed, writeRankFile };
if (require.main === module) main();
