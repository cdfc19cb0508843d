"""Running statistics need a batch: an empty one (or one element per channel) in train mode raises and
leaves the statistics as they were, instead of turning them to NaN (class 8 of the compiled-path issue)."""

import jax.numpy as jnp
import numpy as np
import pytest

import fluxjax as Flux

CASES = [
    ("BatchNorm dense, empty", lambda: Flux.BatchNorm(2), (2, 0), "an empty batch"),
    ("BatchNorm image, empty", lambda: Flux.BatchNorm(2), (3, 3, 2, 0), "an empty batch"),
    ("BatchNorm dense, one", lambda: Flux.BatchNorm(2), (2, 1), "one element"),
    ("InstanceNorm, empty", lambda: Flux.InstanceNorm(2, track_stats=True), (3, 2, 0), "an empty batch"),
    ("InstanceNorm, one pixel", lambda: Flux.InstanceNorm(2, track_stats=True), (1, 2, 4), "one element"),
]


@pytest.mark.parametrize("how", ["eager", "gradient", "jit"])
@pytest.mark.parametrize("label,make,shape,text", CASES, ids=[c[0] for c in CASES])
def test_train_mode_statistics_refuse_empty_batches(label, make, shape, text, how):
    lay = Flux.trainmode_(make())
    mu, s2 = np.asarray(lay.mu), np.asarray(lay.sigma2)
    x = jnp.ones(shape)
    run = {"eager": lambda: lay(x),
           "gradient": lambda: Flux.gradient(lambda m: jnp.sum(m(x)), lay),
           "jit": lambda: Flux.jit(lambda m, x: m(x))(lay, x)}[how]
    with pytest.raises(ValueError, match=text):
        run()
    np.testing.assert_array_equal(lay.mu, mu)
    np.testing.assert_array_equal(lay.sigma2, s2)


def test_test_mode_and_untracked_layers_pass_an_empty_batch_through():
    for lay in (Flux.testmode_(Flux.BatchNorm(2)), Flux.BatchNorm(2, track_stats=False)):
        assert lay(jnp.ones((2, 0))).shape == (2, 0)
    lay = Flux.trainmode_(Flux.BatchNorm(2))
    lay(jnp.arange(6.0).reshape(2, 3))  # two or more elements: fine
    np.testing.assert_allclose(lay.mu, [0.1, 0.4], rtol=1e-6)
