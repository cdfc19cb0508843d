"""Class 2: the output structure belongs to each trace, not to the cache entry."""

import jax.numpy as jnp
import numpy as np

import fluxjax as Flux


def test_output_structure_follows_the_input_shape():
    m = Flux.Dense(2, 3)
    f = Flux.jit(lambda m, x: {"a": m(x)} if x.shape[1] == 4 else {"b": m(x), "c": (m(x), 1.0)})
    xs = [jnp.ones((2, 4)), jnp.ones((2, 5)), jnp.ones((2, 4)), jnp.ones((2, 5))]
    for x in xs:
        out = f(m, x)
        if x.shape[1] == 4:
            assert set(out) == {"a"}
            np.testing.assert_allclose(out["a"], m(x), rtol=1e-6)
        else:
            assert set(out) == {"b", "c"} and isinstance(out["c"], tuple)
            np.testing.assert_allclose(out["c"][0], m(x), rtol=1e-6)


def test_output_length_follows_the_dtype():
    f = Flux.jit(lambda x: (x,) if x.dtype == jnp.float32 else (x, x + 1))
    a, b = jnp.ones(3), jnp.ones(3, jnp.int32)
    assert len(f(a)) == 1 and len(f(b)) == 2 and len(f(a)) == 1 and len(f(b)) == 2
