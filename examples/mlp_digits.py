"""A multi-layer perceptron on scikit-learn's 8×8 digits: Flux's model-zoo `mlp_mnist`, ported line by line.

The model zoo flattens 28×28 MNIST images into 784 × batch columns; here the 1,797 8×8 digits that ship
with scikit-learn (no download) become 64 × batch, flattened from WHCN with `Flux.flatten` in Julia's
column-major order, labels one-hot `(10, N)`. Adam, a shuffling DataLoader, a compiled training step
(`Flux.jit` over `gradient` + `update_`), and `onecold` accuracy, as in the zoo.
Expect the test accuracy to pass 90% by epoch 4 and end at about 97% after 20 epochs (it asserts >= 95%).
With matplotlib installed it saves the loss/accuracy curves (`--plot PATH`, default mlp_digits_curves.png).
Run: python examples/mlp_digits.py [--epochs 20] [--quick] [--plot PATH]   (or FLUXJAX_EXAMPLE_QUICK=1)
"""

import argparse
import os
import time

import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits

import fluxjax as Flux
from fluxjax.losses import logitcrossentropy

from curves import save_curves  # examples/curves.py: matplotlib optional

# Base.@kwdef mutable struct Args; η = 3e-4; batchsize = 256; epochs = 10; end
parser = argparse.ArgumentParser()
parser.add_argument("--eta", type=float, default=3e-3)
parser.add_argument("--batchsize", type=int, default=64)
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--quick", action="store_true", default=os.environ.get("FLUXJAX_EXAMPLE_QUICK") == "1")
parser.add_argument("--plot", default="mlp_digits_curves.png",
                    help="where to save the loss/accuracy curves as a PNG, if matplotlib is installed ('' for none)")
args = parser.parse_args()
if args.quick:
    args.epochs = 2

Flux.seed_(0)                                                          # Random.seed!(0)


def getdata(args):
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)                 # (N, 8 rows, 8 cols) in [0, 1]
    x_whcn = np.transpose(images, (2, 1, 0))[:, :, None, :]             # WHCN (8, 8, 1, N), like MLDatasets
    x_all = Flux.flatten(x_whcn)                                        # xtrain = Flux.flatten(xtrain): 64×N
    # Julia's column-major flatten of WHCN puts pixel (row r, column c) at feature c + 8r: sklearn's order
    assert np.array_equal(np.asarray(x_all), (digits.data / 16.0).T.astype(np.float32))
    y_all = Flux.onehotbatch(digits.target, range(10))                  # ytrain = onehotbatch(ytrain, 0:9)
    perm = np.random.default_rng(0).permutation(x_all.shape[-1])
    test, train = perm[:360], perm[360:]
    train_loader = Flux.DataLoader((x_all[:, train], y_all[:, train]), batchsize=args.batchsize, shuffle=True)
    test_loader = Flux.DataLoader((x_all[:, test], y_all[:, test]), batchsize=args.batchsize)
    return train_loader, test_loader


def build_model(imgsize=(8, 8, 1), nclasses=10):
    return Flux.Chain(
        Flux.Dense(int(np.prod(imgsize)), 32, Flux.relu),              # Dense(prod(imgsize) => 32, relu)
        Flux.Dense(32, nclasses),                                       # Dense(32 => nclasses)
    )


def loss_and_accuracy(data_loader, model):
    acc, ls, num = 0, 0.0, 0
    for x, y in data_loader:
        y_hat = model(x)
        ls += float(logitcrossentropy(y_hat, y, agg=jnp.sum))
        acc += int(jnp.sum(Flux.onecold(y_hat) == Flux.onecold(y)))
        num += x.shape[-1]
    return ls / num, acc / num


train_loader, test_loader = getdata(args)
model = build_model()
print(model)
opt_state = Flux.setup(Flux.Adam(args.eta), model)                      # opt_state = Flux.setup(Adam(η), model)


@Flux.jit  # Flux compiles nothing; here forward, gradient and update are one XLA program
def step(model, opt_state, x, y):
    gs = Flux.gradient(lambda m: logitcrossentropy(m(x), y), model)    # gs = gradient(m -> ..., model)
    Flux.update_(opt_state, model, gs[0])                               # Flux.update!(opt_state, model, gs[1])


t0 = time.time()
history = {"train_loss": [], "test_loss": [], "train_acc": [], "test_acc": []}
for epoch in range(1, args.epochs + 1):
    for x, y in train_loader:
        step(model, opt_state, x, y)
    train_loss, train_acc = loss_and_accuracy(train_loader, model)
    test_loss, test_acc = loss_and_accuracy(test_loader, model)
    for k, v in zip(history, (train_loss, test_loss, train_acc, test_acc)):
        history[k].append(v)
    print(f"epoch {epoch:2d}  train_loss {train_loss:.4f}  train_accuracy {train_acc:.3f}  "
          f"test_loss {test_loss:.4f}  test_accuracy {test_acc:.3f}  ({time.time() - t0:.1f} s)")

if save_curves(args.plot, range(1, args.epochs + 1), {"loss": {"train": history["train_loss"], "test": history["test_loss"]},
                                                    "accuracy": {"train": history["train_acc"], "test": history["test_acc"]}}):
    print(f"saved the curves to {args.plot}")
print(f"final test accuracy: {test_acc:.1%}")
floor = 0.60 if args.quick else 0.95
assert test_acc >= floor, f"expected at least {floor:.0%} test accuracy, got {test_acc:.1%}"
