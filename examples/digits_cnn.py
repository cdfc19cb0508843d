"""A LeNet-style CNN with BatchNorm on scikit-learn's 8×8 digits: the README's main job.

The model-zoo shape of Flux's `conv_mnist`, on data that ships with scikit-learn (1,797 images, no
download). Images are WHCN `(8, 8, 1, N)`, labels one-hot `(10, N)`, exactly as in Flux.
Run: python examples/digits_cnn.py [--epochs 15]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits

import fluxjax as Flux
from fluxjax.losses import logitcrossentropy

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--batchsize", type=int, default=64)
args = parser.parse_args()

Flux.seed_(0)
digits = load_digits()
images = (digits.images / 16.0).astype(np.float32)          # (N, 8, 8), row-major, values in [0, 1]
x_all = np.transpose(images, (2, 1, 0))[:, :, None, :]      # WHCN: (8 width, 8 height, 1, N)
y_all = np.asarray(Flux.onehotbatch(digits.target, list(range(10))), dtype=np.float32)
perm = np.random.default_rng(0).permutation(x_all.shape[-1])
test, train = perm[:360], perm[360:]
x_train, y_train = x_all[..., train], y_all[:, train]
x_test, y_test = x_all[..., test], y_all[:, test]

model = Flux.Chain(
    Flux.Conv((3, 3), (1, 16), pad=1),                      # 8×8×16
    Flux.BatchNorm(16, Flux.relu),
    Flux.MaxPool((2, 2)),                                   # 4×4×16
    Flux.Conv((3, 3), (16, 32), pad=1),                     # 4×4×32
    Flux.BatchNorm(32, Flux.relu),
    Flux.MaxPool((2, 2)),                                   # 2×2×32
    Flux.flatten,                                           # 128
    Flux.Dense(128, 64, Flux.relu),
    Flux.Dropout(0.2),
    Flux.Dense(64, 10),
)
print(model)

loader = Flux.DataLoader((x_train, y_train), batchsize=args.batchsize, shuffle=True)
opt_state = Flux.setup(Flux.Adam(3e-3), model)


def loss(m, x, y):
    return logitcrossentropy(m(x), y)


@Flux.jit
def accuracy(m, x, y):
    return jnp.mean(jnp.argmax(m(x), axis=0) == jnp.argmax(y, axis=0))


t0 = time.time()
for epoch in range(1, args.epochs + 1):
    Flux.train_(loss, model, loader, opt_state)
    tr, te = accuracy(model, x_train, y_train), accuracy(model, x_test, y_test)
    print(f"epoch {epoch:2d}  loss {float(loss(model, x_train, y_train)):.4f}  "
          f"train acc {float(tr):.3f}  test acc {float(te):.3f}  ({time.time() - t0:.1f} s)")

final = float(accuracy(model, x_test, y_test))
print(f"final test accuracy: {final:.1%}")
assert final >= 0.95, "expected at least 95% test accuracy"
jax.block_until_ready(model[0].weight)
