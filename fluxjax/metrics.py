"""`accuracy(model, data)`: the classification accuracy that Flux's model-zoo scripts define by hand,
`accuracy(m, loader) = mean(onecold(m(x)) .== onecold(y))`."""

from collections.abc import Callable, Iterable
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["accuracy"]


def accuracy(model: Callable[[Any], Any], data: Iterable[tuple[Any, Any]]) -> float:
    """The fraction of samples whose predicted class, `argmax(model(x), axis=0)`, is the true class.

    Args:
        model: a callable (a layer, a `Chain`, a function) mapping a batch `x` to scores of shape
            `(classes, batch...)`: logits or probabilities, class axis first as in Flux.
        data: an iterable of `(x, y)` batches, e.g. a `DataLoader((X, Y), batchsize=...)` or a list
            `[(x, y)]`. `y` is either one-hot with the scores' shape `(classes, batch...)`, or 0-based
            integer labels of shape `(batch...)`.

    Returns:
        A Python float in `[0, 1]`: correct predictions over all samples (each sample counts once, so
        a short last batch weighs what it holds). The model is called as is; a model with `Dropout`
        or `BatchNorm` runs in its test behaviour outside a gradient (or call `testmode_` first).

    Raises:
        ValueError: `data` holds no samples, or a `y` fits neither form.

    >>> m = Dense(jnp.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]))   # 2 features -> 3 classes
    >>> x = jnp.array([[2.0, 0.0, 1.0, 0.0], [0.0, 3.0, 1.0, 1.0]])
    >>> m(x).argmax(axis=0)
    Array([0, 1, 0, 1], dtype=int32)
    >>> Flux.accuracy(m, [(x, jnp.array([0, 1, 2, 1]))])             # labels: 3 of 4 right
    0.75
    >>> Flux.accuracy(m, DataLoader((x, onehotbatch([0, 0, 2, 1], range(3))), batchsize=3))
    0.5
    """
    correct = 0
    total = 0
    for i, batch in enumerate(data):
        try:
            x, y = batch
        except (TypeError, ValueError):
            raise ValueError(
                f"accuracy: batch {i} of data is {type(batch).__name__}, expected an (x, y) pair; pass an iterable "
                "of (x, y) batches, e.g. DataLoader((X, Y), batchsize=64) or [(X, Y)]"
            ) from None
        scores = jnp.asarray(model(x))
        y = jnp.asarray(y)
        if scores.ndim == 0:
            raise ValueError(f"accuracy: the model returned a scalar for batch {i}; expected scores of shape (classes, batch...)")
        pred = np.asarray(jnp.argmax(scores, axis=0))
        if y.shape == scores.shape:
            truth = np.asarray(jnp.argmax(y, axis=0))
        elif y.shape == scores.shape[1:] and jnp.issubdtype(y.dtype, jnp.integer):
            truth = np.asarray(y)
        else:
            raise ValueError(
                f"accuracy: batch {i} has y of shape {tuple(y.shape)} and dtype {y.dtype}, but the model's scores have "
                f"shape {tuple(scores.shape)}; y must be one-hot of shape {tuple(scores.shape)} or integer labels of "
                f"shape {tuple(scores.shape[1:])} (use onehotbatch(labels, classes) or 0-based int labels)"
            )
        correct += int(np.sum(pred == truth))
        total += int(pred.size)
    if total == 0:
        raise ValueError("accuracy: data holds no samples; pass a non-empty iterable of (x, y) batches")
    return correct / total
