"""bert.py split (issue 32): the model in llmbook.bert, pre-training data in llmbook.bert_data,
fine-tuning in llmbook.bert_finetune; every name stays importable from llmbook.bert."""

from __future__ import annotations

import subprocess
import sys

import llmbook.bert as bert
import llmbook.bert_data as bert_data
import llmbook.bert_finetune as bert_finetune


def test_every_public_name_still_comes_from_llmbook_bert():
    for name in bert.__all__:
        assert hasattr(bert, name), name
    for mod in (bert_data, bert_finetune):
        for name in mod.__all__:
            assert name in bert.__all__, name
            assert getattr(bert, name) is getattr(mod, name), name


def test_each_concept_lives_in_its_own_module():
    assert bert.mask_tokens.__module__ == "llmbook.bert_data"
    assert bert.fine_tune.__module__ == "llmbook.bert_finetune"
    assert bert.Bert.__module__ == "llmbook.bert"
    src = open(bert.__file__, encoding="utf-8").read()
    assert "def mask_tokens" not in src and "def fine_tune" not in src


def test_either_import_order_works_in_a_fresh_process():
    for code in ("from llmbook.bert_data import mask_tokens; from llmbook.bert import fine_tune",
                 "from llmbook.bert_finetune import fine_tune; from llmbook.bert import mask_tokens, Bert",
                 "from llmbook.bert import *; mask_tokens, linear_probe, BertConfig"):
        subprocess.run([sys.executable, "-c", code], check=True)
