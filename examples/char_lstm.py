"""A character-level LSTM language model: Flux's model-zoo `char-rnn`, ported to Flux 0.15+ recurrence.

The zoo downloads Shakespeare; this reads a text that ships with every CPython: the reference sections
that `help()` shows (`pydoc_data.topics.topics`, about 465,000 characters and 103 distinct characters
on Python 3.11; the exact text varies a little between Python versions, the numbers hardly).
The first 90% of it trains the model; the last 10% (from inside `typesmapping` through `yield`) is held out.

As in Flux 0.15+, the recurrent layer takes a whole sequence, `(features, time, batch)`: one-hot
characters `(N, seqlen, batch)` go through `Chain(LSTM(N => 128), Dense(128 => N))`, and
`logitcrossentropy` over every position is the loss per character. Sampling steps the `LSTMCell`
one character at a time, carrying its `(h, c)` state.
Expect the held-out loss to fall from log(103) = 4.63 (uniform) to 1.78 after one epoch and about 1.37 nats
per character after four (63.7% of next characters right), then a 300-character sample; about 1.5 minutes
on 2 cores. It asserts the loss ends below 0.4·log(vocab).
With matplotlib installed it saves the held-out loss/accuracy curves (`--plot PATH`, default char_lstm_curves.png).
Run: python examples/char_lstm.py [--epochs 4] [--quick] [--plot PATH]   (or FLUXJAX_EXAMPLE_QUICK=1)
"""

import argparse
import math
import os
import time
from pydoc_data.topics import topics

import jax.numpy as jnp
import numpy as np

import fluxjax as Flux
from fluxjax.losses import logitcrossentropy

from curves import save_curves  # examples/curves.py: matplotlib optional

# Base.@kwdef mutable struct Args; lr = 1e-2; seqlen = 50; batchsz = 50; epochs = 3; testpercent = .05; end
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--seqlen", type=int, default=64)
parser.add_argument("--batchsz", type=int, default=32)
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--testpercent", type=float, default=0.10)
parser.add_argument("--quick", action="store_true", default=os.environ.get("FLUXJAX_EXAMPLE_QUICK") == "1")
parser.add_argument("--plot", default="char_lstm_curves.png",
                    help="where to save the loss/accuracy curves as a PNG, if matplotlib is installed ('' for none)")
args = parser.parse_args()

Flux.seed_(0)


def getdata(args):
    text = "".join(topics[k] for k in sorted(topics))                   # text = String(read("input.txt"))
    if args.quick:
        text = text[:60_000]
    alphabet = sorted(set(text))                                        # alphabet = [unique(text)..., '_']
    split = int((1 - args.testpercent) * len(text))

    def sequences(part):
        # Non-overlapping windows of seqlen characters; Y is X shifted by one character.
        n = (len(part) - 1) // args.seqlen
        codes = np.asarray(Flux.onehotbatch(list(part[: n * args.seqlen + 1]), alphabet))   # N × (n*seqlen + 1)
        X = codes[:, :-1].reshape(len(alphabet), n, args.seqlen).transpose(0, 2, 1)          # (N, seqlen, n)
        Y = codes[:, 1:].reshape(len(alphabet), n, args.seqlen).transpose(0, 2, 1)
        return np.ascontiguousarray(X), np.ascontiguousarray(Y)            # permutedims copies in Julia too

    return sequences(text[:split]), sequences(text[split:]), alphabet


def build_model(N, hidden):
    return Flux.Chain(
        Flux.LSTM(N, hidden),                                           # LSTM(N => 128)
        Flux.Dense(hidden, N),                                          # Dense(128 => N)
    )


(trainX, trainY), (testX, testY), alphabet = getdata(args)
N = len(alphabet)
print(f"{len(alphabet)} characters; {trainX.shape[-1]} training and {testX.shape[-1]} held-out sequences of {args.seqlen}")
model = build_model(N, args.hidden)
print(model)


def loss(m, x, y):                                                      # Flux 0.15+: no reset!, whole sequences
    return logitcrossentropy(m(x), y)


@Flux.jit
def loss_and_accuracy(m, x, y):
    y_hat = m(x)
    return logitcrossentropy(y_hat, y), jnp.mean(Flux.onecold(y_hat) == Flux.onecold(y))


train_loader = Flux.DataLoader((trainX, trainY), batchsize=args.batchsz, shuffle=True, partial=False)
opt_state = Flux.setup(Flux.Adam(args.lr), model)                       # opt_state = Flux.setup(Adam(lr), model)
epochs = 1 if args.quick else args.epochs
baseline = math.log(N)
print(f"uniform baseline: log({N}) = {baseline:.3f} nats per character")

t0 = time.time()
history = {"loss": [], "accuracy": []}
for epoch in range(1, epochs + 1):
    Flux.train_(loss, model, train_loader, opt_state)                   # Flux.train!(loss, model, zip(trainX, trainY), opt_state)
    test_loss, test_acc = (float(v) for v in loss_and_accuracy(model, testX, testY))
    history["loss"].append(test_loss)
    history["accuracy"].append(test_acc)
    print(f"epoch {epoch}  held-out loss {test_loss:.4f} nats/char  next-char accuracy {test_acc:.3f}  "
          f"({time.time() - t0:.1f} s)")

if save_curves(args.plot, range(1, epochs + 1), {"held-out loss (nats/char)": {"held-out": history["loss"]},
                                                "next-char accuracy": {"held-out": history["accuracy"]}}):
    print(f"saved the curves to {args.plot}")


@Flux.jit
def next_char(cell, dense, x, state):
    y, state = cell(x, state)                                           # one step of the LSTMCell, (h, c) carried
    return Flux.softmax(dense(y)), state


def sample_data(m, alphabet, length, seed="The ", rng=None):
    # Flux 0.15+: step the cell, carrying its state, where the zoo used reset! and a stateful m(x)
    rng = np.random.default_rng(0) if rng is None else rng
    lstm, dense = m[0], m[1]
    state = Flux.initialstates(lstm)
    for c in seed:
        probs, state = next_char(lstm.cell, dense, Flux.onehot(c, alphabet), state)
    out = list(seed)
    for _ in range(length):
        p = np.asarray(probs, dtype=np.float64)
        c = alphabet[rng.choice(N, p=p / p.sum())]                      # c = wsample(alphabet, softmax(...))
        out.append(c)
        probs, state = next_char(lstm.cell, dense, Flux.onehot(c, alphabet), state)
    return "".join(out)


print("sample:")
print(sample_data(model, alphabet, 300))
print(f"final held-out loss: {test_loss:.4f} nats/char (uniform {baseline:.3f}), next-char accuracy: {test_acc:.1%}")
bound = 0.8 * baseline if args.quick else 0.4 * baseline
assert test_loss < bound, f"expected the held-out loss below {bound:.3f}, got {test_loss:.4f}"
