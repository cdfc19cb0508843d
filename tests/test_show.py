"""Printing of models (Flux.jl/test/layers/show.jl). `repr` is what the Python REPL shows, so it is the
port of Flux's 3-arg `show(io, MIME"text/plain", m)`: one line per layer with its parameter count.

The exact-text tests pin fluxjax's current format (comment column 40, thousands with commas, a Total line
on every container). Where that differs from Flux's own text, a strict xfail test holds Flux's text.
"""

import jax
import jax.numpy as jnp
import pytest

from fluxjax import Chain, Dense, layer
from fluxjax.nnlib import relu, softmax


def test_dense_one_line():
    # Flux.jl/test/layers/show.jl:13-15  repr("text/plain", Dense(2,3)) contains "Dense(2 => 3)" and "# 9 parameters"
    s = repr(Dense(2, 3))
    assert "Dense(2 => 3)" in s and "# 9 parameters" in s
    assert "\n" not in s
    assert str(Dense(2, 3)) == s


def test_dense_exact_text():
    assert repr(Dense(2, 3, relu)) == "Dense(2 => 3, relu)" + " " * 21 + "# 9 parameters"
    assert repr(Dense(2, 3)) == "Dense(2 => 3)" + " " * 27 + "# 9 parameters"
    # Flux's Dense show: `; bias=false` when there is no bias
    assert repr(Dense(2, 3, bias=False)) == "Dense(2 => 3; bias=false)" + " " * 15 + "# 6 parameters"
    assert repr(Dense((784, 64), relu)).startswith("Dense(784 => 64, relu)") and repr(
        Dense((784, 64), relu)).endswith("# 50,240 parameters")


@pytest.mark.xfail(strict=True, reason="fluxjax pads a top-level layer's comment to column 40; Flux pads to "
                   "column 20 (at least 2 spaces), as DESIGN.md quotes")
def test_dense_flux_text():
    # Flux.jl/src/layers/show.jl:_layer_show: " "^max(2, 20 - length(str)) before the comment at top level
    assert repr(Dense(2, 3, relu)) == "Dense(2 => 3, relu)  # 9 parameters"


def test_long_chain_exact_text():
    # Flux.jl/test/layers/show.jl:50-55  longchain = Chain(Dense(2 => 3), Dense(3 => 4), Dense(4 => 5), softmax):
    #   contains "Chain(\n  Dense(2 => 3)", "# 9 parameters" and "# Total: 6 arrays, 50 parameters"
    s = repr(Chain(Dense(2, 3), Dense(3, 4), Dense(4, 5), softmax))
    assert "Chain(\n  Dense(2 => 3)" in s
    assert "# 9 parameters" in s
    assert "# Total: 6 arrays, 50 parameters" in s
    assert s == (
        "Chain(\n"
        "  Dense(2 => 3),                        # 9 parameters\n"
        "  Dense(3 => 4),                        # 16 parameters\n"
        "  Dense(4 => 5),                        # 25 parameters\n"
        "  softmax,\n"
        ")                                       # Total: 6 arrays, 50 parameters, 200 bytes."
    )


def test_chain_relu_block_exact_text():
    s = repr(Chain(Dense(784, 64, relu), Dense(64, 10)))
    assert s == (
        "Chain(\n"
        "  Dense(784 => 64, relu),               # 50,240 parameters\n"
        "  Dense(64 => 10),                      # 650 parameters\n"
        ")                                       # Total: 4 arrays, 50,890 parameters, 203,560 bytes."
    )


def test_named_chain_text():
    # Flux.jl/test/layers/show.jl:6  repr(Chain(lay=Dense(2,3))) == "Chain(lay = Dense(2 => 3))" (2-arg show);
    #   the expanded form labels each layer the same way
    s = repr(Chain(lay=Dense(2, 3)))
    assert s.startswith("Chain(\n  lay = Dense(2 => 3),")
    assert "# 9 parameters" in s


def test_nested_chain_text():
    s = repr(Chain(Chain(Dense(2, 3), Dense(3, 2)), Dense(2, 1)))
    assert s == (
        "Chain(\n"
        "  Chain(\n"
        "    Dense(2 => 3),                      # 9 parameters\n"
        "    Dense(3 => 2),                      # 8 parameters\n"
        "  ),\n"
        "  Dense(2 => 1),                        # 3 parameters\n"
        ")                                       # Total: 6 arrays, 20 parameters, 80 bytes."
    )


def test_short_chain_text():
    # Flux.jl/test/layers/show.jl:33-35  toplevel_chain contains "Chain(\n  Dense(2 => 3)" and "# 9 parameters"
    s = repr(Chain(Dense(2, 3)))
    assert "Chain(\n  Dense(2 => 3)" in s and "# 9 parameters" in s


def test_short_chain_has_no_total():
    # Flux.jl/test/layers/show.jl:36  @test !occursin("# Total:", toplevel_chain)
    assert "# Total:" not in repr(Chain(Dense(2, 3)))
    # Flux's _big_finale: the total only for more than 2 trainable arrays, also with non-trainable ones
    assert "# Total:" not in repr(Chain(Dense(2, 3, bias=False), Dense(3, 1, bias=False)))
    assert repr(Chain(Dense(2, 3), Dense(3, 1, bias=False))).endswith("# Total: 3 arrays, 12 parameters, 48 bytes.")


@pytest.mark.xfail(strict=True, reason="fluxjax groups thousands with commas; Flux's underscorise uses '_'")
def test_thousands_separator_flux():
    # Flux.jl/src/layers/show.jl: underscorise(50240) == "50_240"
    assert "# 50_240 parameters" in repr(Dense(784, 64, relu))


def test_no_fields_layer_in_chain():
    # Flux.jl/test/layers/show.jl:84-90  Chain(Dense(1=>1), Dense(1=>1), NoFields()) contains "4 arrays, 4 parameters"
    @layer
    class NoFields:
        def __call__(self, x):
            return x

    assert repr(NoFields()) == "NoFields()"
    s = repr(Chain(Dense(1, 1), Dense(1, 1), NoFields()))
    assert "4 arrays, 4 parameters" in s
    assert "  NoFields(),\n" in s


def test_function_in_chain_and_non_trainable():
    s = repr(Chain(Dense(2, 3), jnp.tanh))
    assert "\n  tanh,\n" in s

    @layer(trainable=("W",))
    class FB:
        def __init__(self):
            self.W = jnp.ones((2, 2))
            self.b = jnp.ones(2)

        def __call__(self, x):
            return self.W @ x + self.b

    assert repr(FB()) == "FB(W=float32[2, 2], b=float32[2])       # 4 parameters, plus 2 non-trainable"
    s = repr(Chain(FB(), Dense(2, 2)))
    assert "  FB(W=float32[2, 2], b=float32[2]),    # 4 parameters, plus 2 non-trainable\n" in s
    assert s.endswith("# Total: 3 arrays, 10 parameters, plus 1 non-trainable arrays with 2 parameters, 48 bytes.")


def test_user_layer_default_repr():
    @layer
    class Affine:
        def __init__(self):
            self.W = jnp.ones((3, 2))
            self.act = jnp.tanh
            self.n = 3
            self.name = "aff"

        def __call__(self, x):
            return self.act(self.W @ x)

    assert repr(Affine()) == "Affine(W=float32[3, 2], act=tanh, n=3, name='aff') # 6 parameters"


def test_tied_layers_counted_once():
    d = Dense(2, 2)
    s = repr(Chain(d, d, Dense(2, 1)))
    assert s.count("# 6 parameters") == 2  # each line shows its layer
    assert s.endswith("# Total: 4 arrays, 9 parameters, 36 bytes.")  # the total counts arrays once
    assert "# Total:" not in repr(Chain(d, d))  # 2 distinct arrays: no total, as Flux


def test_print_uses_same_text(capsys):
    m = Chain(Dense(2, 3), Dense(3, 1))
    print(m)
    assert capsys.readouterr().out == repr(m) + "\n"


def test_typed_prng_key_field():
    # a typed key (jax.random.key, dtype key<fry>) prints as the key and is not counted as a parameter
    # (Flux's Dropout keeps its rng out of the parameter count too)
    @layer
    class Noisy:
        def __init__(self):
            self.w = jnp.ones(3)
            self.key = jax.random.key(0)

        def __call__(self, x):
            return x * self.w

    assert repr(Noisy()) == "Noisy(w=float32[3], key=key<fry>[])     # 3 parameters"
    s = repr(Chain(Noisy(), Dense(3, 2)))
    assert "  Noisy(w=float32[3], key=key<fry>[]),  # 3 parameters\n" in s
    assert s.endswith("# Total: 3 arrays, 11 parameters, 44 bytes.")
