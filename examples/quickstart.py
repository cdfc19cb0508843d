"""Flux's quick-start (docs/src/guide/models/quickstart.md), ported line by line.

A 2 => 3 => 2 classifier with BatchNorm learns XOR of two noisy inputs with Adam. Flux's docs report
"accuracy 94% so far!" for one run; this prints the accuracy before and after training.

The outcome depends on the random start, in Flux as here: with only 3 hidden units the network
sometimes settles in a local minimum that misclassifies one quadrant (about 83%). Measured with this
script's data and model for seeds 0-13 (300 epochs): 10 of 14 runs end at 93.7-98.0% (median 95.5%),
4 stop at 83-85%. The default seed 1 ends at 97%.
Run: python examples/quickstart.py [--seed N] [--epochs N]
"""

import argparse

import jax
import jax.numpy as jnp

import fluxjax as Flux
from fluxjax.data import DataLoader, onehotbatch
from fluxjax.layers.normalise import BatchNorm
from fluxjax.losses import logitcrossentropy
from fluxjax.nnlib import softmax
from fluxjax.optimise import Adam, setup, update_

cli = argparse.ArgumentParser()
cli.add_argument("--seed", type=int, default=1)
cli.add_argument("--epochs", type=int, default=1000)
args = cli.parse_args()

Flux.seed_(args.seed)
noisy = jax.random.uniform(jax.random.PRNGKey(args.seed + 1), (2, 1000))     # 2×1000 Matrix{Float32}
truth = [bool(a > 0.5) != bool(b > 0.5) for a, b in noisy.T.tolist()]        # 1000-element Vector{Bool}

model = Flux.Chain(Flux.Dense(2, 3, jnp.tanh), BatchNorm(3), Flux.Dense(3, 2))  # Dense(2 => 3, tanh), ...
print(model)

out1 = model(noisy)                                      # 2×1000 Matrix{Float32}
probs1 = softmax(out1)                                   # normalise to get probabilities
target = onehotbatch(truth, [True, False])               # 2×1000 OneHotMatrix
loader = DataLoader((noisy, target), batchsize=64, shuffle=True)
opt_state = setup(Adam(0.01), model)


@Flux.jit  # Flux compiles nothing; here the whole step (forward, gradient, update) is one XLA program
def step(model, opt_state, x, y):
    loss, grads = Flux.withgradient(lambda m: logitcrossentropy(m(x), y), model)
    update_(opt_state, model, grads[0])
    return loss


losses = []
for epoch in range(1, args.epochs + 1):
    for x, y in loader:
        losses.append(step(model, opt_state, x, y))
    if epoch % 100 == 0:
        print(f"epoch {epoch:4d}  loss {float(jnp.mean(jnp.stack(losses[-16:]))):.4f}")

out2 = model(noisy)
probs2 = softmax(out2)
acc1 = float(jnp.mean((probs1[0] > 0.5) == jnp.array(truth)))
acc2 = float(jnp.mean((probs2[0] > 0.5) == jnp.array(truth)))
print(f"accuracy before training: {acc1:.1%}")
print(f"accuracy after training:  {acc2:.1%}   (Flux's docs: 94% so far!)")
