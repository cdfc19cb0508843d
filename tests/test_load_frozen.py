"""`freeze_` survives a checkpoint: `load` (and `loadmodel_` of `state(opt_state)`) restores each
optimiser leaf's frozen flag from the record; a record without the flag keeps the current one."""

import jax.numpy as jnp
import numpy as np

import fluxjax as Flux


def _model():
    m = Flux.Chain(Flux.Dense(2, 3), Flux.Dense(3, 1))
    m[0].weight, m[0].bias = jnp.arange(6.0).reshape(3, 2) / 10, jnp.array([0.1, -0.2, 0.3])
    m[1].weight, m[1].bias = jnp.array([[0.5, -0.4, 0.2]]), jnp.array([0.05])
    return m


def _step(s, m):
    g = Flux.gradient(lambda m: (m(jnp.ones((2, 4))) ** 2).sum(), m)[0]
    Flux.update_(s, m, g)


def test_load_restores_frozen_and_resumes_exactly(tmp_path):
    m, s = _model(), None
    s = Flux.setup(Flux.Adam(0.1), m)
    Flux.freeze_(s.layers[0])
    _step(s, m)
    Flux.save(tmp_path / "ck", m, s)
    _step(s, m)  # the uninterrupted run

    m2 = Flux.Chain(Flux.Dense(2, 3), Flux.Dense(3, 1))
    s2 = Flux.setup(Flux.Adam(0.1), m2)  # fresh: nothing frozen
    Flux.load(tmp_path / "ck", m2, s2)
    assert s2.layers[0].weight.frozen and s2.layers[0].bias.frozen
    assert not s2.layers[1].weight.frozen and not s2.layers[1].bias.frozen
    w0, b0 = np.asarray(m2[0].weight), np.asarray(m2[0].bias)
    _step(s2, m2)
    np.testing.assert_array_equal(m2[0].weight, w0)  # frozen: untouched
    np.testing.assert_array_equal(m2[0].bias, b0)
    np.testing.assert_array_equal(m2[0].weight, m[0].weight)
    np.testing.assert_array_equal(m2[1].weight, m[1].weight)  # the rest as the uninterrupted run
    np.testing.assert_array_equal(m2[1].bias, m[1].bias)


def test_loadmodel_record_is_the_truth_and_missing_flag_keeps_current():
    m = _model()
    src = Flux.setup(Flux.Descent(0.1), m)
    Flux.freeze_(src.layers[1])
    dst = Flux.freeze_(Flux.setup(Flux.Descent(0.1), m))  # all frozen; the record thaws layers[0]
    Flux.loadmodel_(dst, Flux.state(src))
    assert [(lf.weight.frozen, lf.bias.frozen) for lf in dst.layers] == [(False, False), (True, True)]
    # a 0-d bool array, as tree_map(np.asarray, state(s)) makes, is a record too
    rec = Flux.state(src)
    rec["layers"][0]["weight"]["frozen"] = np.asarray(True)
    Flux.loadmodel_(dst, rec)
    assert dst.layers[0].weight.frozen and not dst.layers[0].bias.frozen
    # a record without the field keeps the destination's flag
    rec = Flux.state(src)
    for lf in rec["layers"]:
        for v in lf.values():
            if isinstance(v, dict):
                v.pop("frozen")
    Flux.loadmodel_(dst, rec)
    assert [(lf.weight.frozen, lf.bias.frozen) for lf in dst.layers] == [(True, False), (True, True)]
