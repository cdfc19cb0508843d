"""`KeyPath`, `getkeypath`, `haskeypath`, `setkeypath_` on models and optimiser states (Functors' own
cases are compat/cases_functors.py `case_keypath`)."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux
from fluxjax import Chain, Dense, KeyPath, getkeypath, haskeypath, setkeypath_


def test_paths_into_models_and_states():
    m = Chain(Dense(2, 3), Dense(3, 1))
    assert getkeypath(m, KeyPath("layers", 1, "weight")) is m[1].weight
    assert getkeypath(m, KeyPath(1, "bias")) is m[1].bias  # a Chain indexes as m[1]
    assert getkeypath(m, KeyPath()) is m
    named = Chain(enc=Dense(2, 3), dec=Dense(3, 1))
    assert getkeypath(named, KeyPath("enc", "weight")).shape == (3, 2)
    assert getkeypath(named, KeyPath("layers", "dec")) is named.dec
    opt_state = Flux.setup(Flux.Adam(), m)
    assert getkeypath(opt_state, KeyPath("layers", 0, "weight")) is opt_state.layers[0].weight
    assert haskeypath(m, KeyPath("layers", -1, "sigma")) and not haskeypath(m, KeyPath("layers", 2))
    assert not haskeypath(m, KeyPath("layers", 0, "gamma"))


def test_setkeypath_changes_the_model_in_place():
    m = Chain(Dense(2, 3), Dense(3, 1))
    setkeypath_(m, KeyPath("layers", 0, "weight"), jnp.ones((3, 2)))
    setkeypath_(m, KeyPath("layers", 0, "bias"), jnp.zeros(3))
    np.testing.assert_allclose(m[0](jnp.ones(2)), [2.0, 2.0, 2.0])


def test_printing_and_equality():
    kp = KeyPath("layers", 0, "weight")
    assert repr(kp) == "KeyPath('layers', 0, 'weight')" and str(kp) == "layers.0.weight"
    assert kp == KeyPath(KeyPath("layers"), 0, "weight") and hash(kp) == hash(KeyPath("layers", 0, "weight"))
    assert kp[1:] == KeyPath(0, "weight") and kp[-1] == "weight"


def test_errors():
    m = Chain(Dense(2, 3))
    with pytest.raises(KeyError, match=r"getkeypath: tuple at KeyPath\('layers'\) has no key 3"):
        getkeypath(m, KeyPath("layers", 3))
    with pytest.raises(TypeError, match="a key is a str, an int or a tuple of ints, got float 1.5"):
        KeyPath("layers", 1.5)
    with pytest.raises(TypeError, match="kp must be a KeyPath"):
        haskeypath(m, ("layers", 0))
    with pytest.raises(TypeError, match=r"tuple at KeyPath\('layers'\) cannot be changed in place"):
        setkeypath_(m, KeyPath("layers", 0), Dense(2, 3))
    with pytest.raises(ValueError, match="empty KeyPath"):
        setkeypath_(m, KeyPath(), 1)
