"""Notebook 11, "The article, checked": the re-checks, the table and the quiz."""

import re
from pathlib import Path

import nbformat
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import attn_lib
from attn_lib.lessons import _checking
from attn_lib.lessons import nb11_article as article

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "en" / "11_the_article_checked.ipynb"


@pytest.fixture(autouse=True)
def fresh_attempts():
    saved = set(_checking._ATTEMPTED)
    _checking._ATTEMPTED.discard("quiz")
    yield
    _checking._ATTEMPTED.clear()
    _checking._ATTEMPTED.update(saved)


def test_every_recheck_holds_and_only_the_training_rows_are_left_out():
    rows = article.recheck_claims()
    assert [r.row for r in rows] == sorted(set(range(1, 21)) - {9, 18})
    assert all(r.holds for r in rows), [r for r in rows if not r.holds]


@pytest.mark.parametrize("L", [64, 96])
def test_the_flop_shares_are_what_pytorch_counts(L):
    d_model = 64
    module = attn_lib.SingleHeadAttention(d_model, d_model)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.zeros(1, L, d_model))
    projections = 3 * 2 * L * d_model * d_model
    square = 2 * 2 * L * L * d_model
    assert counter.get_total_flops() == projections + square


def _table_rows():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    text = next(c.source for c in nb.cells if c.source.startswith("## 1 "))
    return [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]


def test_the_table_has_twenty_claims_and_the_key_results_count_them():
    rows = _table_rows()
    assert len(rows) == 20
    verdicts = [re.search(r"\*\*(right|wrong|qualified)\*\*", r).group(1) for r in rows]
    counts = {v: verdicts.count(v) for v in ("right", "qualified", "wrong")}
    first = nbformat.read(NOTEBOOK, as_version=4).cells[0].source
    assert (
        f"{counts['right']} are right, {counts['qualified']} are qualified"
        in " ".join(first.split())
    ) and f"{counts['wrong']} are wrong" in first
    for row in rows:  # a Chinese quote, and a link to the notebook that shows it
        assert re.search(r"[\u4e00-\u9fff]", row)
        target = re.search(r"\]\((\d\d_[a-z_]+\.ipynb)", row).group(1)
        assert (NOTEBOOK.parent / target).exists()


def test_an_empty_quiz_reveals_nothing(capsys):
    assert article.check_quiz({}) == 0
    article.show_answers()
    out = capsys.readouterr().out
    assert "Not answered yet" in out and "Try the quiz first" in out
    assert not any(q.why in out for q in article.QUESTIONS)


def test_the_quiz_names_wrong_answers_and_then_shows_every_answer(capsys):
    answers = {n: q.answer for n, q in enumerate(article.QUESTIONS, start=1)}
    assert article.check_quiz(answers) == len(article.QUESTIONS)
    wrong = next(k for k in article.QUESTIONS[0].options if k != article.QUESTIONS[0].answer)
    assert article.check_quiz({1: wrong.upper(), 2: "z"}) == 0
    out = capsys.readouterr().out
    assert "1. not quite" in out and "Notebook 03" in out and "2. no answer" in out
    article.show_answers()
    assert article.QUESTIONS[-1].why in capsys.readouterr().out


def test_every_question_has_its_answer_among_its_options():
    for q in article.QUESTIONS:
        assert q.answer in q.options and len(q.options) >= 2
        assert (NOTEBOOK.parent).glob(f"{q.where}_*.ipynb")
