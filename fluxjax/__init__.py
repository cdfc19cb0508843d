"""fluxjax: the Flux.jl / Zygote.jl programming model on JAX.

`import fluxjax as Flux` makes a ported Flux script read naturally; `fluxjax.zygote` serves as Zygote,
`fluxjax.optimise` as Optimisers, `fluxjax.nnlib` as NNlib, `fluxjax.losses` as Flux.Losses.
"""

from . import zygote as zygote
from .errors import DimensionMismatch as DimensionMismatch
from .functors import children as children
from .functors import fmap as fmap
from .functors import layer as layer
from .functors import modules as modules
from .functors import trainable as trainable
from .layers.basic import Chain as Chain
from .layers.basic import Dense as Dense
from .layers.basic import activations as activations
from .random import seed_ as seed_
from .state import functional as functional
from .state import jit as jit
from .state import testmode_ as testmode_
from .state import trainmode_ as trainmode_
from .zygote import Buffer as Buffer
from .zygote import Grads as Grads
from .zygote import Params as Params
from .zygote import checkpointed as checkpointed
from .zygote import dropgrad as dropgrad
from .zygote import gradient as gradient
from .zygote import hessian as hessian
from .zygote import hook as hook
from .zygote import ignore as ignore
from .zygote import jacobian as jacobian
from .zygote import params as params
from .zygote import pullback as pullback
from .zygote import withgradient as withgradient
