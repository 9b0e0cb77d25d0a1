"""Retrieval-augmented generation: the question set, the prompt, the grader, and chapter 8g's results file."""

import json
from pathlib import Path

import pytest

from llmbook.rag import (EXAMPLE_ANSWER, FORMATS, SYSTEM_NOTE, grade_answer, normalise_answer, passage_speaker,
                         quote_speech, rag_messages, rag_prompt, speaker_questions)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "data/results/ch08g_rag.json"

PASSAGES = ["HERMIA:\nI would my father look'd but with my eyes.\nSo is the lady of the lake.",
            "and then the rest of a long speech\nthat runs on and on and on here",
            "LYSANDER:\nThe course of true love never did run smooth;\nSo is the lady of the lake.",
            "DUKE SENIOR:\nNow, my co-mates and brothers in exile,\nHath not old custom made this life more sweet"]


def test_passage_speaker():
    assert passage_speaker(PASSAGES[0]) == "HERMIA"
    assert passage_speaker(PASSAGES[1]) is None
    assert passage_speaker(PASSAGES[3]) == "DUKE SENIOR"
    assert passage_speaker("A:\nhi") == "A"
    assert passage_speaker("ROMEO: speaks on the same line") is None  # a heading is a line of its own
    assert passage_speaker("Romeo:\nlower case is not a heading") is None
    with pytest.raises(TypeError, match="passage must be a str"):
        passage_speaker(3)


def test_speaker_questions_quote_a_line_unique_to_its_passage():
    qs = speaker_questions(PASSAGES, 3, seed=1, min_words=4)
    assert len(qs) == 3 and len({q.passage for q in qs}) == 3
    for q in qs:
        assert q.answer == passage_speaker(PASSAGES[q.passage])
        assert q.line in PASSAGES[q.passage].split("\n")[1:]
        assert sum(q.line in p for p in PASSAGES) == 1  # the shared line "So is the lady of the lake." is never asked
        assert q.text == f'Which character says: "{q.line}"?'
    assert speaker_questions(PASSAGES, 3, seed=1, min_words=4) == qs  # reproducible
    orders = {tuple(q.passage for q in speaker_questions(PASSAGES, 3, seed=s, min_words=4)) for s in range(10)}
    assert len(orders) > 1  # the seed shuffles the passages


def test_speaker_questions_errors():
    with pytest.raises(ValueError, match="only 3 questions can be made"):
        speaker_questions(PASSAGES, 4, min_words=4)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        speaker_questions(PASSAGES, 0)
    with pytest.raises(ValueError, match="passages must be a non-empty list"):
        speaker_questions("HERMIA:\nhi", 1)
    with pytest.raises(ValueError, match="min_words <= max_words"):
        speaker_questions(PASSAGES, 1, min_words=5, max_words=4)


def test_rag_messages_plain_and_quoted():
    q = 'Which character says: "The course of true love never did run smooth;"?'
    plain = rag_messages(q, PASSAGES[:2])
    assert plain == [{"role": "user", "content": f"Passage 1:\n{PASSAGES[0]}\n\nPassage 2:\n{PASSAGES[1]}\n\n"
                                                 f"Using the passages, answer: {q}\n{SYSTEM_NOTE}"}]
    assert rag_messages(q) == [{"role": "user", "content": f"{q}\n{SYSTEM_NOTE}"}]
    quoted = rag_messages(q, PASSAGES[2:3], fmt="quoted")
    assert [m["role"] for m in quoted] == ["user", "assistant", "user"] and quoted[1]["content"] == EXAMPLE_ANSWER
    assert quoted[2]["content"].startswith('Passage 1:\nLysander says: "The course of true love never did run smooth; So is')
    closed = rag_messages(q, fmt="quoted")
    assert "Passage" not in closed[0]["content"] and "Passage" not in closed[2]["content"]
    assert quote_speech(PASSAGES[1]) == '"and then the rest of a long speech that runs on and on and on here"'
    with pytest.raises(ValueError, match="fmt must be one of"):
        rag_messages(q, fmt="fancy")
    with pytest.raises(ValueError, match="question must be a non-empty str"):
        rag_messages(" ")
    with pytest.raises(ValueError, match="passages must be a list of str"):
        rag_messages(q, "one string")


def test_rag_prompt_is_the_chat_template_of_the_messages():
    from llmbook.llama import render_chat
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    for fmt in FORMATS:
        for ps in ([], PASSAGES[:3]):
            text = rag_prompt(template, "Who?", ps, fmt)
            assert text == render_chat(template, rag_messages("Who?", ps, fmt))
            assert text.endswith("<|im_start|>assistant\n")
            positions = [text.index(f"Passage {j}:") for j in range(1, len(ps) + 1)]
            assert positions == sorted(positions)  # best first, in the order given


def test_grade_answer():
    names = ["HERMIA", "LYSANDER", "DUKE", "DUKE SENIOR"]
    assert grade_answer("Hermia", "HERMIA", names)
    assert grade_answer("The character is hermia.", "HERMIA", names)
    assert grade_answer("  HERMIA:  ", "HERMIA", names)
    assert not grade_answer("Hermia or Lysander", "HERMIA", names)  # a list of guesses
    assert not grade_answer("Hermione", "HERMIA", names)  # whole words only
    assert grade_answer("Duke Senior", "DUKE SENIOR", names)  # DUKE inside the gold name does not count against it
    assert not grade_answer("Duke", "DUKE SENIOR", names)
    assert not grade_answer("", "HERMIA", names)
    assert normalise_answer("Lady Capulet's!") == "lady capulet s"
    with pytest.raises(ValueError, match="gold must be a str with letters"):
        grade_answer("x", "!!")


# ------------------------------------------------------------------ the committed run of scripts/rag_08g.py
@pytest.fixture(scope="module")
def results():
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_results_questions_and_grades_are_reproduced(results):
    import sys
    sys.path.insert(0, str(ROOT / "scripts"))
    import rag_08g

    passages = rag_08g.index_passages()
    meta = results["meta"]
    qs = speaker_questions(passages, meta["n_val"] + meta["n_test"], seed=meta["seeds"][0])
    stored = results["questions"]["val"] + results["questions"]["test"]
    assert [(q.text, q.answer, q.passage) for q in qs] == [(s["text"], s["answer"], s["passage"]) for s in stored]
    assert results["names"] == sorted({s for s in map(passage_speaker, passages) if s})
    for split in ("val", "test"):
        for cond, replies in results["replies"][split].items():
            golds = [q["answer"] for q in results["questions"][split]]
            assert results["correct"][split][cond] == [int(grade_answer(r, g, results["names"])) for r, g in zip(replies, golds)]


def test_results_choices_follow_validation(results):
    val = results["correct"]["val"]
    acc = {f: sum(val[f"oracle/{f}"]) for f in FORMATS}
    assert results["format"] == max(FORMATS, key=lambda f: (acc[f], -FORMATS.index(f)))
    for r, k in results["chosen_k"].items():
        accs = {kk: sum(val[f"{r}@{kk}"]) for kk in results["meta"]["ks"]}
        assert k == max(accs, key=lambda kk: (accs[kk], -kk))
    assert results["runs"]["test"] == ["closed", f"bm25@{results['chosen_k']['bm25']}",
                                       f"minilm@{results['chosen_k']['minilm']}", "oracle"]
