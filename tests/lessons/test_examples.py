"""lessons/_examples.py: the article's example, the sentences and their embeddings."""

from __future__ import annotations

import pytest
import torch

from attn_lib import ShapeError, SingleHeadAttention
from attn_lib.lessons import _examples


def test_article_example_is_the_articles_and_leaves_the_rng_alone():
    torch.manual_seed(0)
    expected_next = torch.randn(3)
    torch.manual_seed(0)
    ex = _examples.article_example()
    torch.testing.assert_close(torch.randn(3), expected_next)  # global RNG untouched

    torch.manual_seed(42)  # the article's order: seed, x, module
    x = torch.randn(2, 4, 8)
    model = SingleHeadAttention(8, 8)
    torch.testing.assert_close(ex.x, x)
    torch.testing.assert_close(ex.Q, model.W_Q(x).detach())
    torch.testing.assert_close(ex.V, model.W_V(x).detach())


# --- tokens and embeddings ----------------------------------------------------------------------


def test_tokenize():
    assert _examples.tokenize("我爱你") == ("我", "爱", "你")
    assert _examples.tokenize(" dog bites  man ") == ("dog", "bites", "man")
    assert _examples.tokenize(_examples.QKV_SENTENCE) == (
        "a",
        "small",
        "cat",
        "sat",
        "on",
        "the",
        "mat",
    )
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="no tokens"):
            _examples.tokenize(bad)
    with pytest.raises(TypeError):
        _examples.tokenize(["dog"])


def test_embedding_table_is_deterministic_and_order_free():
    state = torch.get_rng_state()
    a = _examples.embedding_table(["我", "爱", "你"], 8, seed=1)
    b = _examples.embedding_table(["你", "爱", "我", "我"], 8, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert list(a) == sorted(a)
    for token in a:
        torch.testing.assert_close(a[token], b[token], rtol=0, atol=0)
        assert a[token].shape == (8,) and a[token].dtype == torch.float32
    c = _examples.embedding_table(["我", "爱", "你"], 8, seed=2)
    assert not torch.equal(a["我"], c["我"])


def test_embedding_table_and_embed_refuse_bad_input():
    with pytest.raises(ValueError, match="empty"):
        _examples.embedding_table([], 8)
    with pytest.raises(ShapeError, match="d_model"):
        _examples.embedding_table(["a"], 0)
    with pytest.raises(ValueError, match="seed"):
        _examples.embedding_table(["a"], 8, seed=-1)
    with pytest.raises(TypeError):
        _examples.embedding_table([1, 2], 8)
    table = _examples.embedding_table(["a", "b"], 4)
    assert _examples.embed(["b", "a", "b"], table).shape == (3, 4)
    with pytest.raises(KeyError, match="c"):
        _examples.embed(["a", "c"], table)
    with pytest.raises(ValueError, match="empty"):
        _examples.embed([], table)
