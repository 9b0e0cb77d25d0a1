"""Retrieval: look things up instead of storing them all in the weights.

Covers two ways a model can consult a store of text.

* Passage retrieval: ``split_passages`` cuts a text into passages, ``MiniLMEmbedder``
  turns passages and queries into unit vectors with chapter 7's all-MiniLM-L6-v2 in the
  book's BERT (mean pooling over real tokens, then L2 normalisation, as
  sentence-transformers does), and ``PassageIndex`` finds the nearest passages of a query
  by exact cosine similarity (one matrix product and a top-k). ``BM25Index`` is the lexical
  baseline beside it: Okapi BM25 over lower-cased words, no learned weights at all.
* The kNN-LM: a datastore of (hidden state before the LM head -> next token) pairs from
  a language model run over training text (``build_datastore``); at test time the k
  nearest stored states vote for their next tokens, p_knn(y) proportional to
  sum over neighbours with value y of exp(-d / temperature), d the squared L2 distance;
  the prediction is p = lambda p_knn + (1 - lambda) p_lm (``knn_lm_loss``).

Leaves out: approximate nearest-neighbour indexes (FAISS, HNSW; exact search is fast
enough for the book's sizes), training the retriever (DPR, REALM), handing retrieved
passages to a generator (RAG puts them in the context; RETRO encodes them and reads them
through chunked cross-attention), and quantised datastores.

The keys here are the hidden states after the final LayerNorm (the LM head's input);
Khandelwal et al. key on the input of the last block's feed-forward network after its
layer norm (their section 3) and use no temperature in p_knn (temperature = 1 here).

Papers: Khandelwal et al. 2020, *Generalization through Memorization: Nearest Neighbor
Language Models* (kNN-LM); Robertson & Zaragoza 2009, *The Probabilistic Relevance
Framework: BM25 and Beyond*; Reimers & Gurevych 2019, *Sentence-BERT*; Lewis et al. 2020,
*Retrieval-Augmented Generation*; Borgeaud et al. 2022, *RETRO*.

Shape legend: N stored items, M queries, D embedding / hidden width, K neighbours,
V vocabulary.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from .device import check_index_range, default_device, model_device

__all__ = [
    "split_passages",
    "MiniLMEmbedder",
    "Hit",
    "PassageIndex",
    "bm25_words",
    "BM25Index",
    "Datastore",
    "LMStates",
    "lm_states",
    "build_datastore",
    "knn_search",
    "knn_distribution",
    "knn_log_probs",
    "mixture_loss",
    "knn_lm_loss",
]


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


# ------------------------------------------------------------------- passages


def split_passages(text: str, max_chars: int = 400, min_chars: int = 1) -> list[str]:
    """Cut ``text`` into passages of at most ``max_chars`` characters.

    Blank lines separate paragraphs (in the Shakespeare corpus, one speech each); a
    paragraph longer than ``max_chars`` is split at line breaks, and a single line longer
    than that at spaces (or hard, if it has none). Passages are stripped of surrounding
    whitespace; those shorter than ``min_chars`` are dropped.

    >>> split_passages("ROMEO:\\nHe jests at scars.\\n\\nJULIET:\\nAy me!\\nO Romeo, Romeo!", max_chars=20)
    ['ROMEO:', 'He jests at scars.', 'JULIET:\\nAy me!', 'O Romeo, Romeo!']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    _check_positive_int("max_chars", max_chars)
    _check_positive_int("min_chars", min_chars)
    if min_chars > max_chars:
        raise ValueError(f"min_chars={min_chars} must be <= max_chars={max_chars}")
    passages: list[str] = []
    for para in text.replace("\r\n", "\n").split("\n\n"):
        current = ""
        for line in para.strip().split("\n"):
            line = line.strip()
            while len(line) > max_chars:  # one very long line: cut at the last space that fits
                cut = line.rfind(" ", 0, max_chars + 1)
                cut = cut if cut > 0 else max_chars
                if current:
                    passages.append(current)
                    current = ""
                passages.append(line[:cut].strip())
                line = line[cut:].strip()
            if not line:
                continue
            if current and len(current) + 1 + len(line) > max_chars:
                passages.append(current)
                current = line
            else:
                current = f"{current}\n{line}" if current else line
        if current:
            passages.append(current)
    return [p for p in passages if len(p) >= min_chars]


# ------------------------------------------------------------------- embeddings


class MiniLMEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 in the book's BERT (chapter 7).

    ``embedder(texts)`` returns an (M, 384) tensor of unit vectors: mean of the last
    hidden states over real tokens, L2-normalised. Texts are cut to ``max_len``
    WordPiece tokens (MiniLM was trained on 128; it accepts up to 512). The model runs on
    ``device`` (default: ``default_device()``); the embeddings are returned there too.
    """

    def __init__(self, max_len: int = 128, batch_size: int = 64, device: torch.device | str | None = None):
        from .bert import Bert
        from .tokenizers.wordpiece import WordPiece

        self.max_len = _check_positive_int("max_len", max_len)
        if max_len < 3:
            raise ValueError(f"max_len must be >= 3 (room for [CLS] and [SEP]), got {max_len}")
        self.batch_size = _check_positive_int("batch_size", batch_size)
        self.device = default_device() if device is None else torch.device(device)
        self.tokenizer = WordPiece.minilm()
        self.model = Bert.from_pretrained_minilm().to(self.device).eval()

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size

    @torch.no_grad()
    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        from .bert import batch_encode, mean_pool

        if isinstance(texts, str) or not isinstance(texts, Sequence) or len(texts) == 0:
            raise ValueError("texts must be a non-empty list of str")
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("texts must hold only str")
        # Sort by length so each batch pads little; put the rows back in order at the end.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = torch.empty(len(texts), self.dim, device=self.device)
        for s in range(0, len(order), self.batch_size):
            chunk = order[s:s + self.batch_size]
            b = batch_encode(self.tokenizer, [texts[i] for i in chunk], max_len=self.max_len)
            b = {k: v.to(self.device) for k, v in b.items()}
            hidden = self.model(**b).last_hidden_state  # (b, T, D)
            out[chunk] = F.normalize(mean_pool(hidden, b["attention_mask"]), dim=-1).float()
        return out


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: its position in the index, cosine similarity, and text."""

    index: int
    score: float
    passage: str


class PassageIndex:
    """Exact nearest-neighbour search by cosine similarity.

    ``PassageIndex(passages, embeddings)`` stores the passages and their (N, D)
    embeddings (normalised here, so any scale is accepted); ``search(queries, k)``
    embeds the queries with ``embed`` (or takes an (M, D) tensor) and returns, for each,
    the k passages of highest cosine similarity, best first.

    >>> idx = PassageIndex(["north", "east"], torch.tensor([[0.0, 2.0], [1.0, 0.0]]))
    >>> [h.passage for h in idx.search(torch.tensor([[0.1, 1.0]]), k=2)[0]]
    ['north', 'east']
    """

    def __init__(self, passages: Sequence[str], embeddings: torch.Tensor, embed=None):
        if isinstance(passages, str) or not isinstance(passages, Sequence) or len(passages) == 0:
            raise ValueError("passages must be a non-empty list of str")
        if not isinstance(embeddings, torch.Tensor) or embeddings.dim() != 2 or embeddings.shape[0] != len(passages):
            raise ValueError(f"embeddings must be an (N={len(passages)}, D) tensor, got shape "
                             f"{tuple(getattr(embeddings, 'shape', ()))}")
        self.passages = list(passages)
        self.embeddings = F.normalize(embeddings.float(), dim=-1)  # (N, D) unit rows: dot product = cosine
        self.embed = embed

    @classmethod
    def build(cls, passages: Sequence[str], embed) -> "PassageIndex":
        """Embed ``passages`` with ``embed`` (e.g. a ``MiniLMEmbedder``) and index them."""
        if not callable(embed):
            raise TypeError("embed must be callable: texts -> (M, D) tensor")
        return cls(passages, embed(list(passages)), embed)

    def __len__(self) -> int:
        return len(self.passages)

    def scores(self, queries) -> torch.Tensor:
        """(M, N) cosine similarity of each query to every passage."""
        if isinstance(queries, str):
            queries = [queries]
        if isinstance(queries, torch.Tensor):
            q = queries.unsqueeze(0) if queries.dim() == 1 else queries
        else:
            if self.embed is None:
                raise ValueError("queries are text but the index has no embed function; pass embed= or tensors")
            q = self.embed(list(queries))
        if q.dim() != 2 or q.shape[1] != self.embeddings.shape[1]:
            raise ValueError(f"query embeddings must be (M, D={self.embeddings.shape[1]}), got {tuple(q.shape)}")
        return F.normalize(q.float().to(self.embeddings.device), dim=-1) @ self.embeddings.T  # (M, N)

    def search(self, queries, k: int = 5) -> list[list[Hit]]:
        """The ``k`` nearest passages of each query (a str, a list of str, or an (M, D) tensor)."""
        _check_positive_int("k", k)
        if k > len(self):
            raise ValueError(f"k={k} is more than the {len(self)} passages in the index")
        top = self.scores(queries).topk(k, dim=-1)  # values, indices: (M, K)
        return [[Hit(int(i), float(s), self.passages[int(i)]) for s, i in zip(vals.tolist(), idx.tolist())]
                for vals, idx in zip(top.values, top.indices)]


def bm25_words(text: str) -> list[str]:
    """The words BM25 counts: lower-cased runs of letters, digits and apostrophes.

    >>> bm25_words("O Romeo, Romeo! wherefore art thou Romeo?")
    ['o', 'romeo', 'romeo', 'wherefore', 'art', 'thou', 'romeo']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return re.findall(r"[0-9a-z']+", text.lower())


class BM25Index:
    """Okapi BM25: rank passages by the query words they contain (Robertson & Zaragoza 2009).

    For a query with words w (each occurrence counted, as rank_bm25 does) and a passage d,

        score(q, d) = sum_w idf(w) * tf(w, d) (k1 + 1) / (tf(w, d) + k1 (1 - b + b |d| / avgdl)),
        idf(w) = log(1 + (N - n(w) + 0.5) / (n(w) + 0.5)),

    with tf the count of w in d, |d| the passage's length in words, avgdl the mean length,
    N passages of which n(w) contain w. Rare words weigh more (idf); a word's count
    saturates (k1); long passages are discounted (b). The defaults k1 = 1.5, b = 0.75 are
    rank_bm25's; the idf with the 1 + inside the log (Lucene's) is never negative.
    ``search`` returns ``Hit``s like ``PassageIndex.search``; equal scores keep passage order.

    Hand check: passages "the cat sat", "the dog", "cat cat dog bird"; query "cat".
    N = 3, n(cat) = 2, idf = log(1 + 1.5 / 2.5) = log 1.6; avgdl = 3. Passage 0: tf 1,
    |d| 3: 2.5 / (1 + 1.5) = 1, score log 1.6 = 0.470. Passage 2: tf 2, |d| 4:
    5 / (2 + 1.5 * 1.25) = 1.290, score 0.606. Passage 1: 0.

    >>> bm = BM25Index(["the cat sat", "the dog", "cat cat dog bird"])
    >>> [round(float(v), 3) for v in bm.scores(["cat"])[0]]
    [0.47, 0.0, 0.606]
    >>> [h.index for h in bm.search("cat", k=2)[0]]
    [2, 0]
    """

    def __init__(self, passages: Sequence[str], k1: float = 1.5, b: float = 0.75):
        if isinstance(passages, str) or not isinstance(passages, Sequence) or len(passages) == 0:
            raise ValueError("passages must be a non-empty list of str")
        if not all(isinstance(p, str) for p in passages):
            raise ValueError("passages must hold only str")
        if isinstance(k1, bool) or not isinstance(k1, (int, float)) or not 0 <= k1 < math.inf:
            raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 <= b <= 1:
            raise ValueError(f"b must be a number in [0, 1], got {b!r}")
        self.passages, self.k1, self.b = list(passages), float(k1), float(b)
        counts = [Counter(bm25_words(p)) for p in self.passages]
        lengths = torch.tensor([sum(c.values()) for c in counts], dtype=torch.float64)  # (N,) words per passage
        avgdl = float(lengths.mean()) or 1.0
        norm = self.k1 * (1 - self.b + self.b * lengths / avgdl)  # (N,) the length discount
        # For every word: the passages that hold it, and its term weight tf (k1 + 1) / (tf + norm) in each.
        self.postings: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        docs: dict[str, list[int]] = {}
        for i, c in enumerate(counts):
            for w in c:
                docs.setdefault(w, []).append(i)
        n = len(self.passages)
        self.idf = {w: math.log(1 + (n - len(ix) + 0.5) / (len(ix) + 0.5)) for w, ix in docs.items()}
        for w, ix in docs.items():
            tf = torch.tensor([counts[i][w] for i in ix], dtype=torch.float64)
            idx = torch.tensor(ix)
            self.postings[w] = (idx, self.idf[w] * tf * (self.k1 + 1) / (tf + norm[idx]))

    def __len__(self) -> int:
        return len(self.passages)

    def scores(self, queries) -> torch.Tensor:
        """(M, N) BM25 score of every passage for each query (a str or a list of str)."""
        if isinstance(queries, str):
            queries = [queries]
        if not isinstance(queries, Sequence) or len(queries) == 0 or not all(isinstance(q, str) for q in queries):
            raise ValueError("queries must be a str or a non-empty list of str")
        out = torch.zeros(len(queries), len(self), dtype=torch.float64)
        for row, q in enumerate(queries):
            for w in bm25_words(q):
                if w in self.postings:  # a word no passage holds adds nothing
                    idx, weight = self.postings[w]
                    out[row].index_add_(0, idx, weight)
        return out

    def search(self, queries, k: int = 5) -> list[list[Hit]]:
        """The ``k`` highest-scoring passages of each query, best first (ties in passage order)."""
        _check_positive_int("k", k)
        if k > len(self):
            raise ValueError(f"k={k} is more than the {len(self)} passages in the index")
        sc = self.scores(queries)
        order = torch.sort(sc, dim=-1, descending=True, stable=True).indices[:, :k]  # (M, K)
        return [[Hit(int(i), float(sc[m, i]), self.passages[int(i)]) for i in row.tolist()]
                for m, row in enumerate(order)]


# ------------------------------------------------------------------- kNN-LM


@dataclass
class Datastore:
    """kNN-LM memory: ``keys`` (N, D) hidden states, ``values`` (N,) the token that followed."""

    keys: torch.Tensor
    values: torch.Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.keys, torch.Tensor) or self.keys.dim() != 2:
            raise ValueError("keys must be an (N, D) tensor")
        if not isinstance(self.values, torch.Tensor) or self.values.shape != self.keys.shape[:1]:
            raise ValueError(f"values must be an (N={self.keys.shape[0]},) tensor, got {tuple(getattr(self.values, 'shape', ()))}")

    def __len__(self) -> int:
        return self.keys.shape[0]


def _windows(n_tokens: int, block_size: int, stride: int) -> list[tuple[int, int]]:
    """(window start, first position of the window to keep) pairs covering positions
    0..n_tokens-2 once each; after the first window every kept position has at least
    ``block_size - stride`` tokens of context."""
    n = n_tokens - 1  # positions that have a next token
    out = [(0, 0)]
    start = 0
    while start + block_size < n:
        start = min(start + stride, n - block_size)
        out.append((start, out[-1][0] + block_size - start))  # skip the positions the last window kept
    return out


@dataclass
class LMStates:
    """A language model read over a text: ``hidden`` (n, D) final hidden states (the LM
    head's input), ``logits`` (n, V), ``targets`` (n,) the tokens that came next."""

    hidden: torch.Tensor
    logits: torch.Tensor
    targets: torch.Tensor

    def log_probs(self) -> torch.Tensor:
        """(n,) log p_lm(target) of every position."""
        return F.log_softmax(self.logits, dim=-1).gather(1, self.targets.unsqueeze(1)).squeeze(1)


@torch.no_grad()
def lm_states(model, ids: torch.Tensor, stride: Optional[int] = None, batch_size: int = 64) -> LMStates:
    """Run a ``GPT`` over the 1-D token ids ``ids`` in windows of ``block_size`` that step by
    ``stride`` (default half the context); every position 0..len(ids)-2 appears once, in order."""
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1:
        raise ValueError(f"ids must be a 1-D tensor of token ids, got shape {tuple(getattr(ids, 'shape', ()))}")
    if ids.dtype not in (torch.int64, torch.int32):  # `.long()` below would truncate floats silently
        raise TypeError(f"ids must be an int64 (torch.long) or int32 tensor of token ids, got dtype {ids.dtype}")
    block = model.config.block_size
    stride = block // 2 if stride is None else stride
    if len(ids) <= block:
        raise ValueError(f"ids has {len(ids)} tokens; need more than block_size={block}")
    _check_positive_int("stride", stride)
    if stride > block:
        raise ValueError(f"stride={stride} must be <= block_size={block}")
    _check_positive_int("batch_size", batch_size)
    was_training = model.training
    model.eval()
    dev = model_device(model)
    wins = _windows(len(ids), block, stride)
    hs, ls, ts = [], [], []
    for s in range(0, len(wins), batch_size):
        chunk = wins[s:s + batch_size]
        x = torch.stack([ids[a:a + block] for a, _ in chunk]).long().to(dev)  # (b, block)
        y = torch.stack([ids[a + 1:a + block + 1] for a, _ in chunk]).long().to(dev)  # (b, block)
        h, _ = model.hidden_states(x)  # (b, block, D)
        logits = model.lm_head(h)  # (b, block, V)
        for j, (_, keep) in enumerate(chunk):
            hs.append(h[j, keep:].float())  # kept on the model's device, as is the datastore
            ls.append(logits[j, keep:].float())
            ts.append(y[j, keep:])
    model.train(was_training)
    return LMStates(torch.cat(hs), torch.cat(ls), torch.cat(ts))


def build_datastore(model, ids: torch.Tensor, stride: Optional[int] = None, batch_size: int = 64) -> Datastore:
    """The kNN-LM datastore of ``model`` over the token ids ``ids`` (1-D).

    Keys are the final hidden states (after the last LayerNorm: the input of the LM
    head); values the next token. See ``lm_states`` for the windows.
    """
    st = lm_states(model, ids, stride, batch_size)
    return Datastore(keys=st.hidden, values=st.targets)


def knn_search(queries: torch.Tensor, store: Datastore, k: int = 16, chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact k nearest keys of each query by squared L2 distance.

    Returns ``(distances, values)``, both (M, K), nearest first: the squared distances
    and the tokens stored with those keys.

    >>> store = Datastore(torch.tensor([[0.0], [1.0], [5.0]]), torch.tensor([7, 8, 9]))
    >>> knn_search(torch.tensor([[0.9]]), store, k=2)
    (tensor([[0.0100, 0.8100]]), tensor([[8, 7]]))
    """
    _check_positive_int("k", k)
    _check_positive_int("chunk", chunk)
    if not isinstance(store, Datastore):
        raise TypeError(f"store must be a Datastore, got {type(store).__name__}")
    if k > len(store):
        raise ValueError(f"k={k} is more than the {len(store)} entries in the datastore")
    if not isinstance(queries, torch.Tensor) or queries.dim() != 2 or queries.shape[1] != store.keys.shape[1]:
        raise ValueError(f"queries must be (M, D={store.keys.shape[1]}), got {tuple(getattr(queries, 'shape', ()))}")
    keys = store.keys.float()
    key_sq = (keys * keys).sum(-1)  # (N,)
    dists, vals = [], []
    for s in range(0, len(queries), chunk):
        q = queries[s:s + chunk].float().to(keys.device)  # (m, D), searched where the datastore lives
        # |q - key|^2 = |q|^2 - 2 q.key + |key|^2; |q|^2 is the same for every key, so rank without it.
        partial = key_sq.unsqueeze(0) - 2 * q @ keys.T  # (m, N)
        neg, idx = (-partial).topk(k, dim=-1)  # (m, K) nearest first
        dists.append(((q * q).sum(-1, keepdim=True) - neg).clamp_min(0))  # (m, K)
        vals.append(store.values[idx])
    return torch.cat(dists), torch.cat(vals)


def knn_distribution(distances: torch.Tensor, values: torch.Tensor, vocab_size: int,
                     temperature: float = 1.0) -> torch.Tensor:
    """p_knn (M, V): each neighbour votes for its token with weight softmax(-distance / temperature).

    >>> knn_distribution(torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([[2, 0, 2]]), vocab_size=3)
    tensor([[0.3333, 0.0000, 0.6667]])
    """
    _check_positive_int("vocab_size", vocab_size)
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not temperature > 0:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}")
    if not isinstance(distances, torch.Tensor) or distances.dim() != 2:
        raise ValueError("distances must be an (M, K) tensor")
    if not isinstance(values, torch.Tensor) or values.shape != distances.shape:
        raise ValueError(f"values must have the shape of distances {tuple(distances.shape)}")
    check_index_range("values", values, vocab_size, what=f"token ids, vocab_size={vocab_size}")
    w = torch.softmax(-distances.float() / temperature, dim=-1)  # (M, K)
    out = torch.zeros(len(w), vocab_size, device=w.device)  # on the device of the neighbours
    return out.scatter_add_(1, values.long().to(w.device), w)  # (M, V)


def knn_log_probs(queries: torch.Tensor, store: Datastore, vocab_size: int, k: int = 16,
                  temperature: float = 1.0, chunk: int = 1024) -> torch.Tensor:
    """log p_knn (M, V) for hidden states ``queries``; tokens no neighbour voted for get log 0 = -inf.

    >>> store = Datastore(torch.tensor([[0.0], [1.0], [5.0]]), torch.tensor([0, 1, 2]))
    >>> knn_log_probs(torch.tensor([[0.4]]), store, vocab_size=3, k=2, temperature=1.0).exp().round(decimals=3)
    tensor([[0.5500, 0.4500, 0.0000]])
    """
    d, v = knn_search(queries, store, k, chunk)
    return knn_distribution(d, v, vocab_size, temperature).log()


def mixture_loss(lm_log_probs: torch.Tensor, knn_log_probs: torch.Tensor, lam: float) -> float:
    """Mean of -log(lam p_knn + (1 - lam) p_lm) over positions, from the (n,) log-probabilities
    of the true next tokens (mixed in probability space through logsumexp).

    >>> round(mixture_loss(torch.tensor([0.5]).log(), torch.tensor([1.0]).log(), 0.5), 4)  # -log 0.75
    0.2877
    """
    if not isinstance(lam, (int, float)) or isinstance(lam, bool) or not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be a number in [0, 1], got {lam!r}")
    if lm_log_probs.shape != knn_log_probs.shape or lm_log_probs.dim() != 1:
        raise ValueError(f"lm_log_probs and knn_log_probs must be (n,) tensors of one shape, got "
                         f"{tuple(lm_log_probs.shape)} and {tuple(knn_log_probs.shape)}")
    if lam == 0:
        mixed = lm_log_probs
    elif lam == 1:
        mixed = knn_log_probs
    else:
        mixed = torch.logaddexp(knn_log_probs + math.log(lam), lm_log_probs + math.log(1 - lam))
    return float(-mixed.mean())


@torch.no_grad()
def knn_lm_loss(model, ids: torch.Tensor, store: Datastore, lambdas: Sequence[float], k: int = 16,
                temperature: float = 1.0, stride: Optional[int] = None) -> dict[float, float]:
    """Mean cross-entropy (nats per token) of the kNN-LM on ``ids`` for each interpolation weight.

    p(y) = lambda p_knn(y) + (1 - lambda) p_lm(y). Returns ``{lambda: loss}``;
    ``lambda = 0`` is the language model alone.
    """
    lambdas = list(lambdas)
    if not lambdas:
        raise ValueError("lambdas is empty: give at least one interpolation weight")
    for lam in lambdas:
        if not isinstance(lam, (int, float)) or isinstance(lam, bool) or not 0.0 <= lam <= 1.0:
            raise ValueError(f"each lambda must be a number in [0, 1], got {lam!r}")
    st = lm_states(model, ids, stride)
    log_lm = st.log_probs()  # (n,)
    log_knn = knn_log_probs(st.hidden, store, st.logits.shape[1], k, temperature)
    log_knn = log_knn.gather(1, st.targets.unsqueeze(1)).squeeze(1)  # (n,)
    return {float(lam): mixture_loss(log_lm, log_knn, lam) for lam in lambdas}
