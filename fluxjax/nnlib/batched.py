"""NNlib's batched linear algebra, batch dims LAST: `batched_mul`, `batched_vec`,
`batched_transpose`, `batched_adjoint`.

`C[:, :, k...] == A[:, :, k...] @ B[:, :, k...]`. A batch size of 1 broadcasts, and either
argument may be a plain matrix, reused for every batch, as NNlib's `⊠`.
Example: `batched_mul(jnp.ones((2, 5, 17)), jnp.ones((5, 9, 17))).shape == (2, 9, 17)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..errors import DimensionMismatch


def batched_mul(A: jax.typing.ArrayLike, B: jax.typing.ArrayLike) -> jax.Array:
    """Batched matrix product `(m, k, b...) x (k, n, b...) -> (m, n, b...)` (NNlib's `A ⊠ B`).

    ```python
    >>> A = jnp.ones((2, 3, 4))   # four 2×3 matrices, batch last as in NNlib
    >>> B = jnp.ones((3, 5, 4))
    >>> batched_mul(A, B).shape
    (2, 5, 4)
    >>> batched_mul(A, B)[0, 0, 0]
    Array(3., dtype=float32)

    ```
    """
    A, B = jnp.asarray(A), jnp.asarray(B)
    if A.ndim < 2 or B.ndim < 2 or A.shape[1] != B.shape[0]:
        raise DimensionMismatch(f"batched_mul of arrays of shapes {A.shape} and {B.shape}")
    if A.ndim == 2 and B.ndim == 2:
        return A @ B
    if A.ndim == 2:
        return jnp.einsum("ij,jk...->ik...", A, B)
    if B.ndim == 2:
        return jnp.einsum("ij...,jk->ik...", A, B)
    batch_ok = A.ndim == B.ndim and all(
        a == b or 1 in (a, b) for a, b in zip(A.shape[2:], B.shape[2:], strict=True)
    )
    if not batch_ok:
        raise DimensionMismatch(f"batch size mismatch in batched_mul: {A.shape} vs {B.shape}")
    return jnp.einsum("ij...,jk...->ik...", A, B)


def batched_vec(A: jax.typing.ArrayLike, b: jax.typing.ArrayLike) -> jax.Array:
    """Batched matrix-vector product `(m, n, k...) x (n, k...) -> (m, k...)`; a vector `b` is shared.

    Sizes that do not fit raise `DimensionMismatch` (a `ValueError`), as NNlib: `A` needs one dim more
    than a batch of vectors `b`, the batch dims must be equal, and `A.shape[1] == b.shape[0]`.

    ```python
    >>> A = jnp.ones((2, 3, 4))
    >>> batched_vec(A, jnp.ones((3, 4))).shape
    (2, 4)
    >>> batched_vec(A, jnp.arange(3.0))[:, 0]   # a vector b is shared by every matrix
    Array([3., 3.], dtype=float32)

    ```
    """
    A, b = jnp.asarray(A), jnp.asarray(b)
    if A.ndim < 2 or b.ndim < 1:
        raise DimensionMismatch(f"batched_vec needs a batch of matrices and of vectors, got shapes {A.shape} and {b.shape}")
    if b.ndim > 1 and A.ndim != b.ndim + 1:
        raise DimensionMismatch(
            f"batched_vec requires ndims(A) == ndims(B) + 1, got ndims(A)={A.ndim} and ndims(B)={b.ndim} "
            f"(shapes {A.shape} and {b.shape})"
        )
    if b.ndim > 1 and A.shape[2:] != b.shape[1:]:
        raise DimensionMismatch(
            f"batch dimensions must match: size(A)[3:end]={A.shape[2:]} != size(B)[2:end]={b.shape[1:]} "
            f"(A.shape[2:] and B.shape[1:] here)"
        )
    if A.shape[1] != b.shape[0]:
        raise DimensionMismatch(f"batched_vec: A.shape[1] = {A.shape[1]} must equal B.shape[0] = {b.shape[0]} "
                                f"(shapes {A.shape} and {b.shape})")
    if b.ndim == 1:
        return jnp.einsum("ij...,j->i...", A, b)
    return jnp.einsum("ij...,j...->i...", A, b)


def batched_transpose(A: jax.typing.ArrayLike) -> jax.Array:
    """Transpose each matrix: `(m, n, b...) -> (n, m, b...)`.

    ```python
    >>> batched_transpose(jnp.zeros((2, 3, 4))).shape
    (3, 2, 4)
    >>> batched_transpose(jnp.arange(6.0).reshape(2, 3, 1))[:, :, 0]
    Array([[0., 3.],
           [1., 4.],
           [2., 5.]], dtype=float32)

    ```
    """
    return jnp.swapaxes(jnp.asarray(A), 0, 1)


def batched_adjoint(A: jax.typing.ArrayLike) -> jax.Array:
    """Conjugate-transpose each matrix: `(m, n, b...) -> (n, m, b...)`.

    ```python
    >>> A = jnp.array([[1 + 2j, 3j]])[..., None]   # one 1×2 complex matrix
    >>> batched_adjoint(A)[:, :, 0]
    Array([[1.-2.j],
           [0.-3.j]], dtype=complex64)

    ```
    """
    return jnp.conj(batched_transpose(A))


__all__ = ["batched_mul", "batched_vec", "batched_transpose", "batched_adjoint"]
