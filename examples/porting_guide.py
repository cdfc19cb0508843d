"""Porting a Flux script: each Julia line (from examples/porting_guide.jl) as a comment above its Python.

A small CNN with Conv, BatchNorm, MaxPool, Dropout and Dense on scikit-learn's 8×8 digits (WHCN, no
download): setup/withgradient/update_, testmode_, the structural gradient, adjust_/freeze_/thaw_,
train_, and state/loadmodel_. The rules of the translation:

- `using Flux` -> `import fluxjax as Flux`; Flux.Losses, Optimisers, Zygote, NNlib -> `fluxjax.losses`,
  `fluxjax.optimise`, `fluxjax.zygote`, `fluxjax.nnlib`.
- `in => out` -> `(in, out)` or two arguments: `Dense(128 => 32, relu)` -> `Dense(128, 32, relu)`.
- `f!` -> `f_`: `update!`, `train!`, `testmode!`, `loadmodel!`, `adjust!`, `freeze!` -> `update_`, ...
- 1-based -> 0-based: `m[1]`, `gs[1]`, `x[:, :, :, 1:2]` -> `m[0]`, `gs[0]`, `x[..., :2]`; `onecold`
  returns 0-based indices; `nothing` -> `None`; `μ`, `σ²` fields -> `mu`, `sigma2`.
- Shapes are Flux's: WHCN images, `(out, in)` weights, features × batch.
Expect the test accuracy to reach about 96% after 12 epochs (it asserts >= 93%) and the reloaded model to agree.
With matplotlib installed it saves the loss/accuracy curves (`--plot PATH`, default porting_guide_curves.png).
Run: python examples/porting_guide.py [--epochs 12] [--quick] [--plot PATH]   (or FLUXJAX_EXAMPLE_QUICK=1)
"""

import argparse
import os
import pickle
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits

# using Flux, Statistics, Random, JLD2
import fluxjax as Flux

# using Flux: onehotbatch, onecold, logitcrossentropy, DataLoader
from fluxjax import DataLoader, onecold, onehotbatch
from fluxjax.losses import logitcrossentropy

from curves import save_curves  # examples/curves.py: matplotlib optional

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=12)
parser.add_argument("--quick", action="store_true", default=os.environ.get("FLUXJAX_EXAMPLE_QUICK") == "1")
parser.add_argument("--plot", default="porting_guide_curves.png",
                    help="where to save the loss/accuracy curves as a PNG, if matplotlib is installed ('' for none)")
args = parser.parse_args()

# Random.seed!(0)
Flux.seed_(0)
# epochs = 8
epochs = 1 if args.quick else args.epochs

# x_train, y_train, x_test, y_test = ...        8×8×1×N Float32, onehotbatch(labels, 0:9)
digits = load_digits()
x_all = np.transpose((digits.images / 16.0).astype(np.float32), (2, 1, 0))[:, :, None, :]   # WHCN (8, 8, 1, N)
y_all = onehotbatch(digits.target, range(10))
perm = np.random.default_rng(0).permutation(x_all.shape[-1])
x_train, y_train = x_all[..., perm[360:]], y_all[:, perm[360:]]
x_test, y_test = x_all[..., perm[:360]], y_all[:, perm[:360]]

# model = Chain(
model = Flux.Chain(
    # Conv((3, 3), 1 => 8; pad=1),
    Flux.Conv((3, 3), (1, 8), pad=1),
    # BatchNorm(8, relu),
    Flux.BatchNorm(8, Flux.relu),
    # MaxPool((2, 2)),
    Flux.MaxPool((2, 2)),
    # Flux.flatten,
    Flux.flatten,
    # Dense(128 => 32, relu),
    Flux.Dense(128, 32, Flux.relu),
    # Dropout(0.3),
    Flux.Dropout(0.3),
    # Dense(32 => 10),
    Flux.Dense(32, 10),
)
print(model)
# @assert size(model(x_train[:, :, :, 1:2])) == (10, 2)
assert model(x_train[..., :2]).shape == (10, 2)
# @assert size(model[1].weight) == (3, 3, 1, 8)
assert model[0].weight.shape == (3, 3, 1, 8)


# loss(m, x, y) = logitcrossentropy(m(x), y)
def loss(m, x, y):
    return logitcrossentropy(m(x), y)


# accuracy(m, x, y) = mean(onecold(m(x)) .== onecold(y))
def accuracy(m, x, y):
    return float(jnp.mean(onecold(m(x)) == onecold(y)))


# loader = DataLoader((x_train, y_train), batchsize=64, shuffle=true)
loader = DataLoader((x_train, y_train), batchsize=64, shuffle=True)
# opt_state = Flux.setup(Adam(3e-3), model)
opt_state = Flux.setup(Flux.Adam(3e-3), model)


# (Julia compiles the loop body itself; here @Flux.jit makes it one XLA program. Without it, it runs eagerly.)
@Flux.jit
def step(model, opt_state, x, y):
    # l, gs = Flux.withgradient(m -> loss(m, x, y), model)
    l, gs = Flux.withgradient(lambda m: loss(m, x, y), model)
    # Flux.update!(opt_state, model, gs[1])
    Flux.update_(opt_state, model, gs[0])
    return l


t0 = time.time()
losses, accs = [], []                                                # (for the curves: one value per epoch)
# for epoch in 1:epochs
for epoch in range(1, epochs + 1):
    # for (x, y) in loader
    batch_losses = []
    for x, y in loader:
        batch_losses.append(step(model, opt_state, x, y))
    losses.append(float(jnp.mean(jnp.stack(batch_losses))))          # the epoch's mean training loss
    # testmode!(model)
    Flux.testmode_(model)
    # @info "epoch" epoch acc = accuracy(model, x_test, y_test)
    accs.append(accuracy(model, x_test, y_test))
    print(f"epoch {epoch}  test accuracy {accs[-1]:.3f}  ({time.time() - t0:.1f} s)")
    # testmode!(model, :auto)
    Flux.testmode_(model, "auto")
# (optional: the loss/accuracy curves as a PNG, when matplotlib is installed)
if save_curves(args.plot, range(1, epochs + 1), {"training loss": {"train": losses}, "accuracy": {"test": accs}}):
    print(f"saved the curves to {args.plot}")

# gs = gradient(m -> loss(m, x_test, y_test), model)
gs = Flux.gradient(lambda m: loss(m, x_test, y_test), model)
# @assert size(gs[1].layers[1].weight) == (3, 3, 1, 8)
assert gs[0].layers[0].weight.shape == (3, 3, 1, 8)
# @assert gs[1].layers[3] === nothing               # MaxPool has no parameters
assert gs[0].layers[2] is None
# @assert !iszero(model[2].μ)                       # BatchNorm's running mean moved during training
assert bool(jnp.any(model[1].mu != 0))

# Flux.adjust!(opt_state, 1e-4)
Flux.adjust_(opt_state, 1e-4)
# Flux.freeze!(opt_state.layers[1])
Flux.freeze_(opt_state.layers[0])
# w = copy(model[1].weight)
w = model[0].weight                                                  # arrays are immutable: no copy needed
# Flux.train!(loss, model, loader, opt_state)
Flux.train_(loss, model, loader, opt_state)
# @assert model[1].weight == w
assert bool(jnp.all(model[0].weight == w))
# Flux.thaw!(opt_state.layers[1])
Flux.thaw_(opt_state.layers[0])

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "model.pkl")
    # jldsave("model.jld2"; model_state = Flux.state(model))
    with open(path, "wb") as f:
        pickle.dump(jax.device_get(Flux.state(model)), f)           # (Flux.save/Flux.load: orbax checkpoints)
    # model2 = Chain(Conv((3, 3), 1 => 8; pad=1), BatchNorm(8, relu), MaxPool((2, 2)), Flux.flatten,
    #                Dense(128 => 32, relu), Dropout(0.3), Dense(32 => 10))
    model2 = Flux.Chain(Flux.Conv((3, 3), (1, 8), pad=1), Flux.BatchNorm(8, Flux.relu), Flux.MaxPool((2, 2)), Flux.flatten,
                        Flux.Dense(128, 32, Flux.relu), Flux.Dropout(0.3), Flux.Dense(32, 10))
    # Flux.loadmodel!(model2, JLD2.load("model.jld2", "model_state"))
    with open(path, "rb") as f:
        Flux.loadmodel_(model2, pickle.load(f))
# testmode!(model); testmode!(model2)
Flux.testmode_(model)
Flux.testmode_(model2)
# @assert model2(x_test) ≈ model(x_test)
assert jnp.allclose(model2(x_test), model(x_test))
# println("final test accuracy: ", accuracy(model, x_test, y_test))
final = accuracy(model, x_test, y_test)
print(f"final test accuracy: {final:.1%}  (reloaded model agrees)")
floor = 0.5 if args.quick else 0.93
assert final >= floor, f"expected at least {floor:.0%} test accuracy, got {final:.1%}"
