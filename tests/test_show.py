"""Printing of models (Flux.jl/test/layers/show.jl). `repr` is what the Python REPL shows, so it is the
port of Flux's 3-arg `show(io, MIME"text/plain", m)`: one line per layer with its parameter count.

The exact-text tests hold Flux's own text (Flux.jl/src/layers/show.jl): a top-level layer's comment at
column 20, a contained layer's at column 40, at least two spaces before either; counts as `50_240`; the
total of a container with more than two trainable arrays after its bracket at column 20.
"""

import jax
import jax.numpy as jnp

from fluxjax import BatchNorm, Chain, Conv, Dense, Dropout, MeanPool, SamePad, SkipConnection, flatten, layer, zeros32
from fluxjax.nnlib import relu, softmax
from fluxjax.show import _format_bytes, _underscorise


def test_dense_one_line():
    # Flux.jl/test/layers/show.jl:13-15  repr("text/plain", Dense(2,3)) contains "Dense(2 => 3)" and "# 9 parameters"
    s = repr(Dense(2, 3))
    assert "Dense(2 => 3)" in s and "# 9 parameters" in s
    assert "\n" not in s
    assert str(Dense(2, 3)) == s


def test_dense_exact_text():
    # Flux.jl/src/layers/show.jl:_layer_show: " "^max(2, 20 - length(str)) before the comment at top level
    assert repr(Dense(2, 3, relu)) == "Dense(2 => 3, relu)  # 9 parameters"  # DESIGN.md's example
    assert repr(Dense(2, 3)) == "Dense(2 => 3)       # 9 parameters"
    # Flux's Dense show: `; bias=false` when there is no bias
    assert repr(Dense(2, 3, bias=False)) == "Dense(2 => 3; bias=false)  # 6 parameters"
    assert repr(Dense((784, 64), relu)) == "Dense(784 => 64, relu)  # 50_240 parameters"


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
        ")                   # Total: 6 arrays, 50 parameters, 200 bytes."
    )


def test_chain_relu_block_exact_text():
    s = repr(Chain(Dense(784, 64, relu), Dense(64, 10)))
    assert s == (
        "Chain(\n"
        "  Dense(784 => 64, relu),               # 50_240 parameters\n"
        "  Dense(64 => 10),                      # 650 parameters\n"
        ")                   # Total: 4 arrays, 50_890 parameters, 198.789 KiB."
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
        ")                   # Total: 6 arrays, 20 parameters, 80 bytes."
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


def test_underscorise_and_format_bytes():
    # Flux.jl/src/layers/show.jl: underscorise(50240) == "50_240"; sizes as Julia's Base.format_bytes
    assert [_underscorise(n) for n in (0, 999, 1000, 50240, 1234567)] == ["0", "999", "1_000", "50_240", "1_234_567"]
    assert [_format_bytes(n) for n in (0, 1, 200, 1024, 1025, 203560, 3 * 2**20)] == [
        "0 bytes", "1 byte", "200 bytes", "1024 bytes", "1.001 KiB", "198.789 KiB", "3.000 MiB"]


def test_flux_modules_docstring_text():
    # Flux.jl/src/utils.jl (`modules` docstring): m2 = Chain(Chain(Dense(28^2, 64), BatchNorm(64, relu)), Dense(64, 10));
    # a contained layer with non-trainable arrays says "plus 128", the total takes two lines
    m1 = Chain(Dense(28**2, 64), BatchNorm(64, relu))
    lines = repr(Chain(m1, Dense(64, 10))).split("\n")
    assert lines[:-1] == [
        "Chain(",
        "  Chain(",
        "    Dense(784 => 64),                   # 50_240 parameters",
        "    BatchNorm(64, relu),                # 128 parameters, plus 128",
        "  ),",
        "  Dense(64 => 10),                      # 650 parameters",
        ")         # Total: 6 trainable arrays, 51_018 parameters,",
    ]
    # Julia's summarysize (200.211 KiB there) counts object headers too; here it is the arrays' bytes,
    # (51_018 + 128) * 4 / 1024 = 199.789 KiB
    assert lines[-1] == "          # plus 2 non-trainable, 128 parameters, summarysize 199.789 KiB."
    # the same docstring, printed alone
    assert repr(BatchNorm(64, relu)) == "BatchNorm(64, relu)  # 128 parameters, plus 128 non-trainable"
    assert repr(Dense(64, 10)) == "Dense(64 => 10)     # 650 parameters"


def test_flux_outputsize_docstring_text():
    # Flux.jl/src/outputsize.jl (`@autosize` docstring): a layer string past column 40 keeps two spaces
    m = Chain(Chain(c=Conv((3, 3), (1, 5), stride=2, pad=SamePad()), p=MeanPool((3, 3)), b=BatchNorm(5), f=flatten),
              Dense(80, 20, relu), SkipConnection(Dense(20, 20, relu), jnp.add), Dense(20, 10))
    assert repr(m).split("\n")[:13] == [
        "Chain(",
        "  Chain(",
        "    c = Conv((3, 3), 1 => 5, pad=1, stride=2),  # 50 parameters",
        "    p = MeanPool((3, 3)),",
        "    b = BatchNorm(5),                   # 10 parameters, plus 10",
        "    f = flatten,",  # Flux: Flux.flatten
        "  ),",
        "  Dense(80 => 20, relu),                # 1_620 parameters",
        "  SkipConnection(",
        "    Dense(20 => 20, relu),              # 420 parameters",
        "    +,",
        "  ),",
        "  Dense(20 => 10),                      # 210 parameters",
    ]


def test_nan_and_zero_notes():
    # Flux.jl/src/layers/show.jl:_nan_show, after the count
    assert repr(Dense(2, 3, init=zeros32)) == "Dense(2 => 3)       # 9 parameters  (all zero)"
    w = jnp.ones((3, 2))
    assert repr(Dense(w.at[0, 0].set(jnp.nan), jnp.zeros(3))) == "Dense(2 => 3)       # 9 parameters  (some NaN)"
    assert repr(Dense(w, jnp.zeros(3).at[1].set(-jnp.inf))) == "Dense(2 => 3)       # 9 parameters  (some Inf)"
    s = repr(Chain(Dense(w * jnp.nan, jnp.zeros(3)), Dense(3, 1)))
    assert "  Dense(2 => 3),                        # 9 parameters  (some NaN)\n" in s

    seen = []
    jax.jit(lambda m: seen.append(repr(m)) or m.weight.sum())(Dense(2, 3, init=zeros32))
    assert seen == ["Dense(2 => 3)       # 9 parameters"]  # traced values are not inspected


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

    assert repr(FB()) == "FB(W=float32[2, 2], b=float32[2])  # 4 parameters, plus 2 non-trainable"
    s = repr(Chain(FB(), Dense(2, 2)))
    assert "  FB(W=float32[2, 2], b=float32[2]),    # 4 parameters, plus 2\n" in s
    assert s.endswith(
        ")         # Total: 3 trainable arrays, 10 parameters,\n"
        "          # plus 1 non-trainable, 2 parameters, summarysize 48 bytes."
    )


def test_integer_and_bool_arrays_count_as_non_trainable():
    # Flux's _childarray_sum counts every AbstractArray{<:Number}, and trainables skips Integer (and Bool)
    # arrays: an index array and a mask are "non-trainable" in the comment and in the total
    @layer
    class Lookup:
        def __init__(self):
            self.W = jnp.ones((2, 3))
            self.idx = jnp.arange(4)
            self.mask = jnp.ones(3, bool)

        def __call__(self, x):
            return self.W[:, self.idx]

    assert repr(Lookup()) == "Lookup(W=float32[2, 3], idx=int32[4], mask=bool[3])  # 6 parameters, plus 7 non-trainable"
    s = repr(Chain(Lookup(), Dense(2, 2)))
    assert "  Lookup(W=float32[2, 3], idx=int32[4], mask=bool[3]),  # 6 parameters, plus 7\n" in s
    assert s.endswith(
        ")         # Total: 3 trainable arrays, 12 parameters,\n"
        "          # plus 2 non-trainable, 7 parameters, summarysize 67 bytes."
    )
    # a random layer's key (raw uint32[2]) is its RNG, which Flux does not count as an array
    assert repr(Chain(Dense(2, 2), Dropout(0.5), Dense(2, 2))).endswith("# Total: 4 arrays, 12 parameters, 48 bytes.")


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

    assert repr(Affine()) == "Affine(W=float32[3, 2], act=tanh, n=3, name='aff')  # 6 parameters"


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

    assert repr(Noisy()) == "Noisy(w=float32[3], key=key<fry>[])  # 3 parameters"
    s = repr(Chain(Noisy(), Dense(3, 2)))
    assert "  Noisy(w=float32[3], key=key<fry>[]),  # 3 parameters\n" in s
    assert s.endswith("# Total: 3 arrays, 11 parameters, 44 bytes.")


def test_arrays_beside_layers_are_listed():
    # Flux.jl/src/layers/show.jl (the Tmp2 example): a layer with a sub-layer is expanded, and each of
    # its trainable children is listed, arrays too (Julia's size and short type, with their count)
    @layer
    class Tmp2:
        def __init__(self):
            self.parts = [Dense(2, 3), jnp.ones((4, 3))]
            self.act = jnp.tanh  # static: not a trainable child, not listed
            self.z = jnp.zeros(3)

        def __call__(self, x):
            return x

    assert repr(Tmp2()) == (
        "Tmp2(\n"
        "  Dense(2 => 3),                        # 9 parameters\n"
        "  4×3 Matrix{float32},                  # 12 parameters\n"
        "  3-element Vector{float32},            # 3 parameters  (all zero)\n"
        ")                   # Total: 4 arrays, 24 parameters, 96 bytes."
    )


def test_chain_of_functions_only_is_one_line():
    # Flux.jl/src/layers/show.jl `_big_show`: a container whose children are all leaf-like (functions,
    # no layers) is shown by `_layer_show` on one line, as Parallel and SkipConnection here
    assert repr(Chain(relu, softmax)) == "Chain(relu, softmax)"
    assert repr(Chain()) == "Chain()"
    assert repr(Chain(a=relu)) == "Chain(a = relu)"
    assert repr(Chain(Chain(relu), Dense(2, 2))) == (
        "Chain(\n"
        "  Chain(relu),\n"
        "  Dense(2 => 2),                        # 6 parameters\n"
        ")"
    )
