"""The book's BERT against transformers' on CPU, in one process (ratios, not absolute times).

    python benchmarks/bench_bert.py            # prints the two ratios last, as name=value

1. mlm_train_ratio_vs_hf: one masked-LM training step (forward, backward, AdamW) of
   ``BertForPreTraining`` (MLM loss only) / transformers' ``BertForMaskedLM``, same
   config, same batch, same masked positions. The book's head projects onto the
   vocabulary only at the ~15% masked positions (as the original BERT code did);
   transformers' head projects every position.
2. minilm_inference_ratio_vs_hf: encoding 1,000 sentences (batches of 64, padded)
   with all-MiniLM-L6-v2 loaded into the book's ``Bert`` / transformers' ``BertModel``
   (its default SDPA attention). The book's model runs the fused attention kernel
   because no attention weights are requested.
Below 1.0 means the book's code is faster. Each timing is the median of interleaved runs.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

import torch  # noqa: E402

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


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_mlm_train(repeats: int = 7) -> float:
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

    for f in (step_ours, step_ref):  # warm-up
        f()
    t_ours, t_ref = [], []
    for _ in range(repeats):  # interleaved, so that load on a shared machine hits both alike
        t_ours.append(median_time(step_ours, 1))
        t_ref.append(median_time(step_ref, 1))
    a, b = statistics.median(t_ours), statistics.median(t_ref)
    print(f"MLM train step (B=16, T=64, D=256, 4 layers, V=30522): book {a * 1e3:.1f} ms, transformers {b * 1e3:.1f} ms")
    return a / b


@torch.no_grad()
def bench_minilm_inference(n: int = 1000, batch_size: int = 64, repeats: int = 2) -> float:
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

    run_ours(), run_ref()  # warm-up
    t_ours, t_ref = [], []
    for _ in range(repeats):
        t_ours.append(median_time(run_ours, 1))
        t_ref.append(median_time(run_ref, 1))
    a, b = statistics.median(t_ours), statistics.median(t_ref)
    print(f"MiniLM, {n} tweets in batches of {batch_size}: book {a:.2f} s, transformers {b:.2f} s")
    return a / b


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    mlm = bench_mlm_train()
    inf = bench_minilm_inference()
    print(f"mlm_train_ratio_vs_hf={mlm:.3f}")
    print(f"minilm_inference_ratio_vs_hf={inf:.3f}")


if __name__ == "__main__":
    main()
