"""Peak memory of streaming byte-level BPE (``ByteBPETokenizer.encode_iterable``) on a 100 MB file.

A text of generated words (Zipf-distributed over a made-up vocabulary, with punctuation,
digits, Chinese characters and line breaks; nothing is downloaded) is written to a temporary
file; a byte-level BPE tokenizer (GPT-2's pattern, vocabulary 2,000, trained on the first
megabyte) encodes it. Each measurement runs in a fresh process, whose peak resident memory
is reset after the tokenizer is loaded (``/proc/self/clear_refs``), so it counts only what
the encoding adds. Prints, last and one per line, ``name=value``:

- ``stream_peak_mb_100mb``: extra peak memory (MB) streaming the 100 MB file, ids counted
  as they come. Target <= 64 MB: a block of ``_STREAM_READ_CHARS`` characters and the work
  on it, whatever the file's size.
- ``stream_peak_ratio_100mb_vs_10mb``: that peak / the same on the file's first 10 MB.
  Constant memory means about 1; target <= 1.5.
- ``encode_peak_mb_10mb``: extra peak of ``encode`` on the first 10 MB read whole (the text,
  its pre-tokens and the id list), for scale: it grows with the text.

Before measuring, the ids streamed from the first 10 MB are checked equal to ``encode``'s.
One run of each (a memory peak, not a timing; no repeats). ``--quick``: 5 MB and 1 MB.

Usage: ``python benchmarks/bench_tokenizers_stream.py [--quick] [--keep FILE]``. Not part of
``make bench`` (it writes 100 MB and takes a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Results, print_machine, quick_mode  # noqa: E402

MB = 1_000_000


def write_text(path: Path, n_bytes: int, seed: int = 0) -> None:
    """Write about ``n_bytes`` of generated text, in blocks (never the whole text in memory)."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 9))) for _ in range(20_000)]
    words += ["今天", "天气", "我们", "学习", "模型", "1999", "2024", "42", "can't", "it's", "we'll"]
    weights = [1 / (k + 1) for k in range(len(words))]
    seps = [" "] * 30 + [", ", ". ", "! ", "? ", "\n", "\n\n", "  ", "\t"]
    written = 0
    with open(path, "w", encoding="utf-8", newline="") as f:
        while written < n_bytes:
            block = "".join(w + rng.choice(seps) for w in rng.choices(words, weights, k=100_000))
            data = block.encode("utf-8")[: n_bytes - written].decode("utf-8", errors="ignore")
            f.write(data)
            written += len(data.encode("utf-8"))


def _rss_now_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _peak_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def child(mode: str, tok_path: str, text_path: str, n_chars: int) -> None:
    """One measurement in this process: print a JSON line with the extra peak (kB) and the time."""
    import gc

    from llmbook.tokenizers import Tokenizer

    tok = Tokenizer.load(tok_path)
    tok.encode("warm up the regex and the cache: 今天 it's 42.\n")
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM (the peak) to the current RSS
    except OSError:
        pass
    base = _rss_now_kb()
    t0 = time.perf_counter()
    with open(text_path, encoding="utf-8", newline="") as f:
        if mode == "stream":
            count = 0
            for _ in tok.encode_iterable(_limited(iter(lambda: f.read(1 << 16), ""), n_chars)):
                count += 1
        elif mode == "whole":
            text = f.read(n_chars)
            count = len(tok.encode(text))
        elif mode == "check":
            text = f.read(n_chars)
            f.seek(0)
            same = list(tok.encode_iterable(_limited(iter(lambda: f.read(1 << 16), ""), n_chars))) == tok.encode(text)
            print(json.dumps({"same": same}))
            return
        else:
            raise ValueError(f"mode must be stream, whole or check, got {mode!r}")
    seconds = time.perf_counter() - t0
    peak = _peak_kb()
    print(json.dumps({"extra_peak_kb": peak - base, "base_kb": base, "ids": count, "seconds": seconds,
                      "ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def _limited(blocks, n_chars: int):
    """The first ``n_chars`` characters of a stream of blocks."""
    left = n_chars
    for b in blocks:
        if left <= 0:
            return
        yield b[:left]
        left -= len(b)


def run_child(mode: str, tok_path: Path, text_path: Path, n_chars: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(tok_path), str(text_path), str(n_chars)],
                         capture_output=True, text=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    if out.returncode:
        sys.exit(f"the {mode} run failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5], int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 MB and 1 MB (a smoke test; also BENCH_QUICK=1)")
    args = ap.parse_args()
    quick = quick_mode()
    big, small = (5 * MB, 1 * MB) if quick else (100 * MB, 10 * MB)
    print_machine()
    res = Results("bench_tokenizers_stream", quick=quick)
    from llmbook.tokenizers import ByteBPETokenizer

    with tempfile.TemporaryDirectory() as tmp:
        text_path, tok_path = Path(tmp) / "text.txt", Path(tmp) / "tok.json"
        t0 = time.perf_counter()
        write_text(text_path, big)
        print(f"wrote {text_path.stat().st_size:,} bytes of generated text in {time.perf_counter() - t0:.0f} s", flush=True)
        with open(text_path, encoding="utf-8", newline="") as f:
            head = f.read(MB)
        ByteBPETokenizer.train(head, 2000, progress=False).save(tok_path)
        del head
        check = run_child("check", tok_path, text_path, small)
        print(f"streamed ids of the first {small // MB} MB equal encode's: {check['same']}", flush=True)
        if not check["same"]:
            sys.exit("encode_iterable and encode disagree")
        runs = {}
        for name, mode, n in (("stream_big", "stream", big), ("stream_small", "stream", small), ("whole_small", "whole", small)):
            runs[name] = r = run_child(mode, tok_path, text_path, n)
            print(f"{mode} {n // MB} MB: {r['ids']:,} ids in {r['seconds']:.0f} s, extra peak {r['extra_peak_kb'] / 1000:.1f} MB "
                  f"(resident before: {r['base_kb'] / 1000:.0f} MB)", flush=True)
    big_mb, small_mb = big // MB, small // MB
    res.add(f"stream_peak_mb_{big_mb}mb", runs["stream_big"]["extra_peak_kb"] / 1000, goal="<= 64", unit="MB",
            higher_is_better=False, reference=f"file size {big_mb} MB",
            description=f"extra peak memory streaming {big_mb} MB of generated text through ByteBPETokenizer.encode_iterable")
    res.add(f"stream_peak_ratio_{big_mb}mb_vs_{small_mb}mb",
            runs["stream_big"]["extra_peak_kb"] / max(runs["stream_small"]["extra_peak_kb"], 1), goal="<= 1.5",
            higher_is_better=False, reference=f"the same stream cut at {small_mb} MB",
            description="streaming peak at 10x the text: about 1 when memory does not grow with the text")
    res.add(f"encode_peak_mb_{small_mb}mb", runs["whole_small"]["extra_peak_kb"] / 1000, unit="MB", higher_is_better=False,
            description=f"extra peak memory of encode on the first {small_mb} MB read whole, for scale")
    res.finish()


if __name__ == "__main__":
    main()
