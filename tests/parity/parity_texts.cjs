// The texts tests/e2e/test_tokenizer_parity.sh encodes with dtrain and with the references: every
// Unicode class the pre-tokenizer regexes tell apart, white space of every kind, numbers,
// contractions in both cases, punctuation, emoji sequences, special-token spellings, and long runs
// (beyond the BPE core's short-piece scan). Characters are from Unicode 14 or older (PCRE2 10.42's
// tables). `hf: false` marks texts where JavaScript's RegExp (tokenizers.js) parts from the Rust
// regex engines of tiktoken and Hugging Face's own tokenizers, which dtrain follows: U+0085 and
// U+FEFF in \s, Unicode case folding in (?i:'s).
"use strict";

function parityTexts() {
  const texts = [
    // prose, letters of many scripts, combining marks
    { name: "english", text: "Hello world! The quick brown fox jumps over the lazy dog." },
    { name: "mixed case", text: "HeLLo WORLD, hello World; iPhone XML HTTPServer camelCase snake_case" },
    { name: "latin accents", text: "Crème brûlée, façade, naïve, Ångström, São Paulo, Łódź, Dvořák, İstanbul" },
    { name: "combining marks", text: "e\u0301 cafe\u0301 n\u0303 a\u0308\u0304 Z\u0324\u0354\u0367\u0311\u0313a\u0356\u032d\u0308\u0307" },
    { name: "cyrillic", text: "Привет, как дела? Съешь же ещё этих мягких французских булок." },
    { name: "greek", text: "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ελληνικά!" },
    { name: "hebrew", text: "שלום עולם! זוהי בדיקה, עם ניקוד: שָׁלוֹם" },
    { name: "arabic", text: "مرحبا بالعالم، هذا اختبار. السَّلَامُ عَلَيْكُمْ ١٢٣٤٥" },
    { name: "devanagari", text: "नमस्ते दुनिया। यह एक परीक्षण है १२३४" },
    { name: "cjk", text: "你好，世界！這是一個測試。こんにちは、世界。カタカナ ひらがな 漢字" },
    { name: "hangul", text: "안녕하세요 세계! 한국어 테스트입니다." },
    { name: "thai", text: "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ" },
    { name: "other scripts", text: "ქართული Հայերեն ሰላም ᏣᎳᎩ ꦗꦮ ଓଡ଼ିଆ தமிழ் ಕನ್ನಡ ລາວ ᠮᠣᠩᠭᠣᠯ" },
    { name: "letter-like", text: "ℕ ℤ ℚ ℝ ℂ ﬁ ﬂ Ⅻ ⅻ ½ ¾ ² ³ ① ⑩ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛" },
    // white space
    { name: "spaces", text: "a  b   c    d     e" },
    { name: "trailing spaces", text: "trailing spaces   " },
    { name: "leading spaces", text: "   leading spaces" },
    { name: "only spaces", text: "     " },
    { name: "tabs", text: "\tTabbed\t\tline\t \t end\t" },
    { name: "crlf", text: "line one\r\nline two\r\n\r\nline four\r\n" },
    { name: "newlines", text: "many\n\n\n\n\nnewlines\n \n  \n\t\nend\n\n" },
    { name: "lone cr", text: "carriage\rreturn\r\rdone" },
    { name: "unicode spaces", text: "ideographic\u3000space, no-break\u00a0space, thin\u2009space, em\u2003space\u202f\u205f\u1680" },
    { name: "line separators", text: "line\u2028separator and paragraph\u2029separator" },
    { name: "vertical tab form feed", text: "vertical\u000btab form\u000cfeed \u000b\u000c x" },
    { name: "empty", text: "" },
    { name: "single newline", text: "\n" },
    // numbers
    { name: "long numbers", text: "1234567890123456789012345 and 3.14159265358979323846 and 1,000,000.00" },
    { name: "number mix", text: "v2.0.1 0x1F 1e-10 -42 +7 12:30 2024-01-31 50% 3rd 100km/h" },
    { name: "non-ascii digits", text: "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ ０１２３ ๑๒๓" },
    // contractions
    { name: "contractions", text: "I'm sure you'll see they've done it; she'd say it's what we're doing, don't." },
    { name: "contractions upper", text: "I'M SURE YOU'LL SEE THEY'VE DONE IT; SHE'D SAY IT'S WHAT WE'RE DOING, DON'T." },
    { name: "contractions mixed", text: "'S 'LL 'Ve 'd 'M 'T 'Re 's's ''s 'sx 'lly" },
    { name: "apostrophes", text: "rock 'n' roll ’tis the season's ‘quoted’ \"double\" «guillemets»" },
    // punctuation and code
    { name: "punctuation runs", text: "Wait!!! What??? Really?!... Yes--no---maybe;;; ok:: (((nested))) [[x]] {{y}}" },
    { name: "symbols", text: "$$$100 €50 £20 ¥1000 ©®™ ±×÷ ≤≥≠ ∑∏∫ →←↑↓ ♠♣♥♦ §¶ @user #tag ~/path" },
    { name: "url", text: "https://example.com/path/to/page?query=1&x=y#frag mailto:a.b@c.org" },
    { name: "code", text: "def f(x):\n    return x ** 2  # square\n\nif (a && b) { c++; } else { d--; }\n" },
    { name: "json", text: "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}" },
    // emoji
    { name: "emoji", text: "😀😃😄 👍 ❤️ ✨ 🎉🎉🎉 ☕" },
    { name: "emoji skin tones", text: "👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 👋🏽hi" },
    { name: "emoji zwj", text: "👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 🧑‍🤝‍🧑 🐻‍❄️" },
    { name: "flags keycaps", text: "🇩🇪🇫🇷🇯🇵 1️⃣ #️⃣ 🏴󠁧󠁢󠁳󠁣󠁴󠁿" },
    // special-token spellings
    { name: "endoftext", text: "<|endoftext|>" },
    { name: "endoftext inside", text: "before<|endoftext|>after <|endoftext|> spaced" },
    { name: "endoftext twice", text: "<|endoftext|><|endoftext|>" },
    { name: "endoftext broken", text: "<|endoftext| <|endoftext <|endoftex|> endoftext|>" },
    { name: "endoftext newline", text: "doc one\n<|endoftext|>\ndoc two" },
    { name: "fim tokens", text: "<|fim_prefix|>def f():<|fim_suffix|>    return 1<|fim_middle|><|endofprompt|>" },
    { name: "llama tokens", text: "<|begin_of_text|>Hi there<|end_of_text|>" },
    { name: "added tokens", text: "a <mask>  b dtrain_added dtrain_addeddtrain_added <|endoftext|>ish x" },
    // long runs: pieces longer than the short-piece scan
    { name: "long spaces", text: "x" + " ".repeat(1000) + "y" },
    { name: "long newlines", text: "\n".repeat(300) },
    { name: "long word", text: "pneumonoultramicroscopicsilicovolcanoconiosis".repeat(8) },
    { name: "long digits", text: "31415926535897932384626433832795028841971693993751".repeat(6) },
    { name: "long punctuation", text: "-=".repeat(150) + "!" },
    { name: "long emoji", text: "👍🏽".repeat(60) },
    { name: "long cjk", text: "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年".repeat(6) },
    // JavaScript's regex parts from Rust's here: tiktoken only
    { name: "next line", text: "next\u0085line  \u0085 x", hf: false },
    { name: "byte order mark", text: "\ufeffbom at start and \ufeff inside", hf: false },
    { name: "long s", text: "it'ſ the Kelvin 'K sign" },
  ];
  return texts;
}

module.exports = { parityTexts };
