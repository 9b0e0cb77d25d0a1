"""llmbook: the helper library of the book *How large language models work*.

Each module holds the final version of one concept that a chapter derives step by
step: ``tokenizers`` (chapter 1), ``rnn`` (2), ``attention`` (3), ``layers`` and
``transformer`` (4), ``positional`` (5), ``gpt``, ``sampling``, ``train``, ``flops``
and ``compression`` (6), ``bert`` (the model; ``bert_data`` its pre-training data,
``bert_finetune`` fine-tuning) (7), ``llama``, ``moe``, ``retrieval``, ``rag``,
``sparse_attention``, ``scaling`` and ``parallel`` (8).
``device``, ``data``, ``checkpoint`` (safetensors IO for every model) and ``atomic``
are shared by every chapter; ``exercises`` holds the exercise checkers (one module per
chapter); ``viz`` holds the figures and widgets.
"""

__version__ = "0.1.0"
