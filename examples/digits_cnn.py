"""A LeNet-style CNN with BatchNorm on scikit-learn's 8×8 digits: the README's main job.

The model-zoo shape of Flux's `conv_mnist`, on data that ships with scikit-learn (1,797 images, no
download). Images are WHCN `(8, 8, 1, N)`, labels one-hot `(10, N)`, exactly as in Flux.
Run: python examples/digits_cnn.py [--epochs 15] [--devices all] [--plot digits_cnn_curves.png]

`--devices all` (or a number) trains data parallel on every local device: the model is replicated and
each batch is split along its last axis (`fluxjax.parallel`). To try it on a CPU, simulate devices:
XLA_FLAGS=--xla_force_host_platform_device_count=8 python examples/digits_cnn.py --devices all
`--devices distributed` is the same over every device of a multi-process job (one process per host,
e.g. a TPU pod slice): it calls `parallel.initialize()` and each process trains on its slice of the data.
"""

import argparse
import time

import jax
import numpy as np
from sklearn.datasets import load_digits

import fluxjax as Flux
from fluxjax import parallel
from fluxjax.losses import logitcrossentropy

from curves import save_curves  # examples/curves.py: matplotlib optional

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--batchsize", type=int, default=64)
parser.add_argument("--devices", default=None,
                    help="'all', a number, or 'distributed' (every device of a jax.distributed job): "
                         "data parallel over those devices (default: one device)")
parser.add_argument("--plot", default="digits_cnn_curves.png",
                    help="where to save the loss/accuracy curves as a PNG, if matplotlib is installed ('' for none)")
args = parser.parse_args()
if args.devices == "distributed":
    parallel.initialize()  # before any array; TPU pods, SLURM, Open MPI: nothing else to give

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

mesh, train_data, batchsize = None, (x_train, y_train), args.batchsize
if args.devices is not None:
    mesh = parallel.device_mesh(None if args.devices in ("all", "distributed") else int(args.devices))
    print(f"data parallel over {mesh.size} devices in {jax.process_count()} process(es): {mesh.devices.ravel().tolist()}")
    if jax.process_count() > 1:  # each process loads its own slice; train_ assembles the global batch
        train_data, batchsize = parallel.local_slice(train_data), batchsize // jax.process_count()
# on a mesh every batch must split evenly over the devices: drop the short last batch
loader = Flux.DataLoader(train_data, batchsize=batchsize, shuffle=True, partial=mesh is None)
opt_state = Flux.setup(Flux.Adam(3e-3), model)


def loss(m, x, y):
    return logitcrossentropy(m(x), y)


def accuracy(m, x, y):
    return Flux.accuracy(m, [(x, y)])  # the model-zoo's mean(onecold(m(x)) .== onecold(y))


t0 = time.time()
curves = {"epoch": [], "loss": [], "train": [], "test": []}
for epoch in range(1, args.epochs + 1):
    Flux.train_(loss, model, loader, opt_state, mesh=mesh)
    Flux.testmode_(model)  # train_ leaves BatchNorm and Dropout in train mode, as Flux's train!
    tr, te, lo = accuracy(model, x_train, y_train), accuracy(model, x_test, y_test), float(loss(model, x_train, y_train))
    for k, v in zip(curves, (epoch, lo, tr, te)):
        curves[k].append(v)
    print(f"epoch {epoch:2d}  loss {lo:.4f}  train acc {tr:.3f}  test acc {te:.3f}  ({time.time() - t0:.1f} s)")

if save_curves(args.plot, curves["epoch"], {"training loss": {"train": curves["loss"]},
                                          "accuracy": {"train": curves["train"], "test": curves["test"]}}):
    print(f"saved the curves to {args.plot}")

final = accuracy(model, x_test, y_test)
print(f"final test accuracy: {final:.1%}")
assert final >= 0.95, "expected at least 95% test accuracy"
jax.block_until_ready(model[0].weight)
