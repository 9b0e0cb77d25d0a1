"""The book's BERT against transformers' on CPU, in one process (ratios, not absolute times).

    python benchmarks/bench_bert.py            # prints the two ratios last, as name=value

1. mlm_train_ratio_vs_hf: one masked-LM training step (forward, backward, AdamW) of
   ``BertForPreTraining`` (MLM loss only) / transformers' ``BertForMaskedLM``, same
   config, same batch, same masked positions. The book's head projects onto the
   vocabulary only at the ~15% masked positions (as the original BERT code did);
   transformers' head projects every position.
2. minilm_inference_ratio_vs_hf: encoding 64 tweets (one padded batch)
   with all-MiniLM-L6-v2 loaded into the book's ``Bert`` / transformers' ``BertModel``
   (its default SDPA attention). The book's model runs the fused attention kernel
   because no attention weights are requested.
Below 1.0 means the book's code is faster. Timing follows ``benchmarks/_timing.py``: a
warm-up, then ``--repeats`` runs of each side alternating (A B B A ...), medians and
interquartile ranges, ratios from paired runs, goals (<= 1.0) checked at the pessimistic
end. ``--quick`` (or ``BENCH_QUICK=1``): 3 repeats and 256 sentences, a smoke test.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _timing import Results, measure, print_machine, quick_mode, ratio, set_threads  # noqa: E402

from llmbook.bert import Bert, BertConfig, BertForPreTraining, batch_encode, mask_tokens, minilm_dir, special_ids  # noqa: E402
from llmbook.tokenizers.wordpiece import WordPiece  # noqa: E402


def hf_config(cfg: BertConfig):
    from transformers import BertConfig as HFConfig

    return HFConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position, layer_norm_eps=cfg.layer_norm_eps,
        hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.attention_dropout,
    )


def bench_mlm_train(res: Results, repeats: int = 7) -> None:
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=256, n_layers=4, n_heads=4, intermediate_size=1024, max_position=128)
    ours = BertForPreTraining(cfg).train()
    ref = BertForMaskedLM(hf_config(cfg)).train()
    ids = torch.randint(1000, cfg.vocab_size, (16, 64))
    x, labels = mask_tokens(ids, mask_id=103, vocab_size=cfg.vocab_size, special_ids=range(1000), generator=torch.Generator().manual_seed(0))
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-4)

    def step_ours():
        loss = ours(x, mlm_labels=labels).loss
        opt_ours.zero_grad(set_to_none=True)
        loss.backward()
        opt_ours.step()

    def step_ref():
        loss = ref(input_ids=x, labels=labels).loss
        opt_ref.zero_grad(set_to_none=True)
        loss.backward()
        opt_ref.step()

    t = measure({"book": step_ours, "transformers": step_ref}, repeats=repeats, warmup=1)
    print(f"MLM train step (B=16, T=64, D=256, 4 layers, V=30522):\n  {t['book']}\n  {t['transformers']}", flush=True)
    res.add("mlm_train_ratio_vs_hf", ratio(t["book"], t["transformers"]), goal="<= 1.0", higher_is_better=False,
            reference="transformers BertForMaskedLM",
            description="masked-LM training step (B=16, T=64, D=256, 4 layers) / transformers'")


@torch.no_grad()
def bench_minilm_inference(res: Results, n: int = 1000, batch_size: int = 64, repeats: int = 5) -> None:
    from transformers import BertModel

    from llmbook.data import load_sentiment

    ours = Bert.from_pretrained_minilm()
    ref = BertModel.from_pretrained(str(minilm_dir()), local_files_only=True).eval()
    wp = WordPiece.minilm()
    texts = [t for t, _ in load_sentiment("tweets_en").train[:n]]
    batches = [batch_encode(wp, texts[i : i + batch_size], max_len=128) for i in range(0, n, batch_size)]

    def run_ours():
        for b in batches:
            ours(**b)

    def run_ref():
        for b in batches:
            ref(**b)

    t = measure({"book": run_ours, "transformers": run_ref}, repeats=repeats, warmup=1)
    print(f"MiniLM, {n} tweets in batches of {batch_size}:\n  {t['book']}\n  {t['transformers']}", flush=True)
    res.add("minilm_inference_ratio_vs_hf", ratio(t["book"], t["transformers"]), goal="<= 1.0",
            higher_is_better=False, reference="transformers BertModel (SDPA)",
            description=f"all-MiniLM-L6-v2 encoding {n} tweets in batches of {batch_size} / transformers'")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 repeats, 256 sentences (also BENCH_QUICK=1)")
    args = ap.parse_args()
    quick = quick_mode()
    set_threads()
    print_machine()
    res = Results("bench_bert", quick=quick)
    bench_mlm_train(res, 3 if quick else args.repeats)
    # 64 tweets (one padded batch) per timed run: about 2 s of CPU, so 2 x 6 runs fit in make bench
    bench_minilm_inference(res, n=32 if quick else 64, repeats=3 if quick else max(5, args.repeats - 2))
    res.finish()


if __name__ == "__main__":
    main()
