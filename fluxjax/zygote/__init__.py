"""Zygote's API as a translation onto `jax.vjp`.

`gradient(f, args...)` differentiates with respect to every float array inside the arguments (layers
included), by swapping JAX tracers into the live objects for the duration of the call (see
`fluxjax.core.region`), and returns one entry per argument: arrays for arrays, `Tangent`s shaped like layers,
`None` where Zygote gives `nothing` (no dependence on the loss, static fields, state, integers used as
indices). Integer numbers and arrays passed as arguments are differentiated as reals, as Zygote does.
Implicit mode, `gradient(() -> loss, params(m))`, swaps the tracers into the slots that `Params` names
and returns `Grads`.

The package: `tangent` (structural gradients), `plan` (the translation onto `jax.vjp`), `intargs`
(which integer arguments are differentiated), `api` (the entry
points), `implicit` (`Params`, `params`, `Grads`), `closure` (globals and closure lookup, the tracer-leak
check), `rules` (`adjoint`), `control` (`dropgrad`, `ignore`, `hook`, `checkpointed`, `forwarddiff`) and
`buffer` (`Buffer`).
"""

from .adtypes import AutoEnzyme as AutoEnzyme
from .adtypes import AutoFiniteDifferences as AutoFiniteDifferences
from .adtypes import AutoMooncake as AutoMooncake
from .adtypes import AutoZygote as AutoZygote
from .api import diaghessian as diaghessian
from .api import gradient as gradient
from .api import hessian as hessian
from .api import hessian_reverse as hessian_reverse
from .api import jacobian as jacobian
from .api import pullback as pullback
from .api import pushforward as pushforward
from .api import withgradient as withgradient
from .api import withjacobian as withjacobian
from .buffer import Buffer as Buffer
from .control import checkpointed as checkpointed
from .control import dropgrad as dropgrad
from .control import forwarddiff as forwarddiff
from .control import hook as hook
from .control import ignore as ignore
from .control import ignore_derivatives as ignore_derivatives
from .control import isderiving as isderiving
from .control import showgrad as showgrad
from .implicit import Grads as Grads
from .implicit import Params as Params
from .implicit import params as params
from .plan import WithGradient as WithGradient
from .rules import adjoint as adjoint
from .tangent import Tangent as Tangent
