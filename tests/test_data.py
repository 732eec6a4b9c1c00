"""The examples of notebook 01 (attn_lib.lessons): the library, sentences, embeddings.

Also the claims those data carry: word order needs positions (C12), and the library's
retrieval takes the best book and skims the close ones.
"""

from __future__ import annotations

import pytest
import torch

from attn_lib import ShapeError
from attn_lib.lessons import _examples, _experiments, nb01_retrieval

# ---------------------------------------------------------------------------
# The library (notebook 01)
# ---------------------------------------------------------------------------


def test_library_shapes_and_ranges():
    lib = nb01_retrieval.library_books()
    n = len(lib.titles)
    assert 5 <= n <= 7 and len(set(lib.titles)) == n
    assert lib.keys.shape == (n, len(nb01_retrieval.KEY_FEATURES)) == (n, 4)
    assert lib.values.shape == (n, len(nb01_retrieval.VALUE_FEATURES)) == (n, 5)
    assert lib.keys.dtype == lib.values.dtype == torch.float32
    assert bool(((lib.keys >= 0) & (lib.keys <= 1)).all())
    assert bool((lib.values >= 0).all())
    torch.testing.assert_close(lib.values.sum(-1), torch.ones(n))


def test_library_query():
    torch.testing.assert_close(nb01_retrieval.library_query(), torch.tensor([1.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(nb01_retrieval.library_query({"cooking": 0.5}), torch.tensor([0, 0, 0, 0.5]))
    with pytest.raises(ValueError, match="unknown feature"):
        nb01_retrieval.library_query({"poetry": 1.0})
    with pytest.raises(ValueError, match="finite"):
        nb01_retrieval.library_query({"maths": float("nan")})


def test_the_articles_query_takes_the_best_book_and_skims_the_close_ones():
    lib = nb01_retrieval.library_books()
    q = nb01_retrieval.library_query()
    best = lib.titles.index("Mathematics for Deep Learning")
    sharp = nb01_retrieval.retrieve(q, lib.keys, lib.values, temperature=0.05)
    assert int(sharp.weights.argmax()) == best and float(sharp.weights[best]) > 0.99
    skim = nb01_retrieval.retrieve(q, lib.keys, lib.values, temperature=0.3)
    order = skim.weights.argsort(descending=True).tolist()
    assert order[0] == best and 0.5 < float(skim.weights[best]) < 0.9  # measured 0.75
    close = {lib.titles[i] for i in order[1:3]}
    assert close == {"Deep Learning in Practice", "Linear Algebra"}
    far = [lib.titles.index(t) for t in ("The Silk Road", "Home Cooking")]
    assert float(skim.weights[far].sum()) < 0.01
    # the blend of page shares is again a set of page shares, mostly equations and code
    torch.testing.assert_close(skim.blended.sum(), torch.tensor(1.0))
    assert float(skim.blended[:2].sum()) > 0.8
    flat = nb01_retrieval.retrieve(q, lib.keys, lib.values, temperature=1000.0)
    torch.testing.assert_close(flat.blended, lib.values.mean(0), atol=1e-3, rtol=0)


# ---------------------------------------------------------------------------
# Tokens and embeddings
# ---------------------------------------------------------------------------


def test_tokenize():
    assert _examples.tokenize("我爱你") == ("我", "爱", "你")
    assert _examples.tokenize(" dog bites  man ") == ("dog", "bites", "man")
    assert _examples.tokenize(_examples.QKV_SENTENCE) == ("a", "small", "cat", "sat", "on", "the", "mat")
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


# ---------------------------------------------------------------------------
# Word order (C12)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pair", nb01_retrieval.WORD_ORDER_PAIRS)
def test_word_order_needs_positions(pair):
    a, b = (_examples.tokenize(s) for s in pair)
    assert sorted(a) == sorted(b) and a != b  # the same tokens, another order
    table = _examples.embedding_table(a + b, 8, seed=0)
    model = _experiments.seeded_attention(8, seed=0)
    plain = nb01_retrieval.word_order_outputs(a, b, table, model)
    for i, j in enumerate(plain.match):
        assert a[i] == b[j]
        torch.testing.assert_close(plain.output_a[i], plain.output_b[j])
    with_pe = nb01_retrieval.word_order_outputs(a, b, table, model, positions=True)
    assert float(with_pe.deviation.min()) > 1e-2  # measured ≥ 0.06 for 我爱你 / 你爱我
