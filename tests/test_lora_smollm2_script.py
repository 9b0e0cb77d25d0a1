"""scripts/lora_smollm2_ch09.py: the instruction data it builds, the format rule, and the committed adapter."""

import importlib.util
import random
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = ROOT / "data/checkpoints/ch09_smollm2_answer_lora.safetensors"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("lora_smollm2_ch09", ROOT / "scripts" / "lora_smollm2_ch09.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_numbers_in_words(script):
    assert [script.in_words(n) for n in (0, 13, 20, 47, 99)] == ["zero", "thirteen", "twenty", "forty-seven",
                                                                 "ninety-nine"]


def test_questions_are_seeded_and_their_answers_right(script):
    words = ["castle", "dagger", "honour", "ghost"]
    assert script.make_question(random.Random(3), words) == script.make_question(random.Random(3), words)
    rng = random.Random(0)
    for _ in range(500):
        q, a = script.make_question(rng, words)
        assert q and a and "\n" not in a
        if m := re.fullmatch(r"What is (\d+) \+ (\d+)\?", q):
            assert int(a) == int(m[1]) + int(m[2])
        if m := re.fullmatch(r'How many letters are in the word "(\w+)"\?', q):
            assert int(a) == len(m[1])
        if m := re.fullmatch(r"What day comes after (\w+)\?", q):
            assert script.DAYS.index(a) == (script.DAYS.index(m[1]) + 1) % 7
        assert script.format_ok(script.reply_text(a), ended=True)       # every target is in the format


def test_format_rule(script):
    assert script.format_ok("Answer: Paris.", True)
    assert not script.format_ok("Answer: Paris.", False)                 # the turn must end
    assert not script.format_ok("The capital of France is Paris.", True)
    assert not script.format_ok("Answer: Paris.\nIt is in France.", True)
    assert len(script.TEST) == 40 and len({q for q, _ in script.TEST}) == 40


def test_committed_adapter_records_its_run(script):
    from llmbook.train import load_checkpoint

    assert ADAPTER.stat().st_size <= 5_000_000
    ck = load_checkpoint(ADAPTER)
    meta = ck["meta"]
    assert all(k.endswith((".lora_A", ".lora_B")) for k in ck["model"])   # the adapter alone
    assert meta["lora"]["r"] == 8 and len(meta["lora"]["layers"]) == 120
    assert meta["before"]["summary"]["test_format_rate"] == 0.0
    assert meta["after"]["summary"]["test_format_rate"] >= 0.9
    test_questions = [q for q, _ in script.TEST]
    assert [r["question"] for r in meta["before"]["test"]] == [r["question"] for r in meta["after"]["test"]] == test_questions
    assert meta["format_regex"] == script.FORMAT


def test_names_answer_scores_content_in_any_wording(script):
    na = script.names_answer
    assert na("What is 3 times 4?", "3 x 4 = 12. This is basic.", ["12"])
    assert na("What is 3 times 4?", "Answer: 12.", ["12"])
    assert not na("What is 3 times 4?", "Answer: 124.", ["12"]) and not na("What is 3 times 4?", "1.12", ["12"])
    freeze = ("At what temperature in Celsius does water freeze?", ["0", "zero"])
    assert not na(freeze[0], "The freezing point of water is -18.0°C.", freeze[1])   # "0" inside a decimal
    assert not na(freeze[0], "Answer: 0.0000000000000001.", freeze[1])
    assert na(freeze[0], "Answer: 0.", freeze[1]) and na(freeze[0], "It freezes at 0 °C, or zero.", freeze[1])
    assert not na("Write 72 in words.", "seventy-twenty", ["seventy"])
    assert na("Write 72 in words.", "Answer: seventy-two.", ["seventy-two"])
    assert not na("Which is larger, 4 or 52?", "Between 4 and 52 it is hard to say.", ["52"])  # both options named
    assert na("Which is larger, 4 or 52?", "The answer is 52.", ["52"])
    assert not na("Is 11 even or odd?", "11 is indeed even.", ["odd"])
    assert not na("What is 5 times 1?", "To find 5 times 1, we multiply.", ["5"])         # only repeats the question
    assert na("What is 5 times 1?", "5 times 1 is 5.", ["5"])
    assert not na('Give "relume" in upper case.', "Relume is a verb.", ["RELUME"])        # capitals must be written
    assert na('What is the first letter of "confutes"?', 'It is "C".', ["c"])


def test_rescoring_the_stored_replies(script):
    """The stored replies of the committed run, scored for content; the validation answers rebuilt from the seed."""
    from llmbook.train import load_checkpoint

    meta = load_checkpoint(ADAPTER)["meta"]
    train_q, val_q = script.build_questions(meta["seed"], meta["n_train"], len(meta["before"]["val"]))
    assert [q for q, _ in val_q] == [r["question"] for r in meta["before"]["val"]]
    assert [list(x) for x in train_q[:8]] == [list(x) for x in meta["train_examples"]]
    for (q, a), r in zip(val_q, meta["after"]["val"]):
        assert r["exact"] <= script.names_answer(q, r["reply"], [a])   # an exact reply names its answer
