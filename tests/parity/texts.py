# The parity texts the tokenizer tests encode with dtrain and with a reference implementation: every
# Unicode class, white-space runs, long numbers, contractions, punctuation runs, emoji, special-token
# spellings. Printed one per line (texts with a line end inside are written with `--multiline`, as JSON).
import json
import sys

TEXTS = [
    "Hello world",
    "The GNU General Public License is a free, copyleft license for software.",
    "  leading spaces and trailing spaces   ",
    "tabs\tbetween\t\twords\t",
    "many     spaces      here",
    "numbers 1234567890 3.14159 1,000,000 007 2026-11-27 12345678901234567890123",
    "contractions: I'm you're he's we'll they'd it's don't CAN'T I'LL SHE'S",
    "punctuation!!! ??? ... --- *** ((())) [[]] {} <> ;;; :: ,,, \"quoted\" 'single'",
    "Ünïcödé ÀÉÎÕÜ àéîõü ß ø å æ œ Ł ł",
    "Русский текст, Ελληνικά γράμματα, Српски",
    "中文文本测试，日本語のテキスト、한국어 텍스트",
    "العربية نص عربي مع أرقام ١٢٣",
    "עברית טקסט",
    "हिन्दी पाठ देवनागरी",
    "ไทย ภาษาไทย",
    "combining: e\u0301 a\u0300 n\u0303 o\u0308 \u0041\u030a",
    "emoji 😀 🎉 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇩🇪",
    "math ∑ ∫ √ ∞ ≠ ≤ ≥ π α β γ",
    "mixed123abc ABC123 a1b2c3 x86_64 C++20 e.g. i.e.",
    "URL https://example.org/path?query=1&x=y#frag and e-mail someone@example.com",
    "code: for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "special spelled <|endoftext|> in the middle",
    "<|endoftext|>",
    "a</s>b <s> c",
    "x" * 300,
    " ",
    "zero\u200bwidth\u200cjoiner\u200d",
]

MULTILINE = [
    "line one\nline two\n",
    "windows\r\nline ends\r\n\r\n",
    "paragraph\n\n\nafter blank lines",
    "trailing spaces   \n   leading",
]

if __name__ == "__main__":
    if "--multiline" in sys.argv:
        for t in MULTILINE:
            print(json.dumps(t))
    else:
        for t in TEXTS:
            print(t)
