"""NumPy float64 references for Optimisers.jl's rules, written from the rule table in `src/rules.jl`
(research/flux-api.md section (d)), and the runner the rule tests share. Each reference returns
(state, Δ); x ← x - Δ."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax


def np_rule(name: str, hp: dict):  # noqa: C901 - one branch per rule, like the table
    sq = np.sqrt

    def adam_moments(st, g, b):
        st["m"] = b[0] * st["m"] + (1 - b[0]) * g
        st["v"] = b[1] * st["v"] + (1 - b[1]) * g**2

    def init(x):
        z = np.zeros_like(x)
        b = hp.get("beta", (0.9, 0.999))
        return {"m": z.copy(), "v": z.copy(), "bt": list(b), "t": 1, "vel": z.copy(), "quad": z.copy(),
                "lin": z.copy(), "g": z.copy(), "etas": np.full_like(x, hp.get("eta", 0)), "u": z.copy(),
                "term": z.copy(), "acc": np.full_like(x, hp.get("epsilon", 0)) if name == "AdaGrad" else z.copy(),
                "dacc": z.copy(), "vhat": z.copy(), "s": z.copy()}  # fmt: skip

    def step(st, x, g):
        eta, eps = hp.get("eta"), hp.get("epsilon")
        b = hp.get("beta")
        if name == "Descent":
            return eta * g
        if name == "Momentum":
            st["vel"] = hp["rho"] * st["vel"] + eta * g
            return st["vel"]
        if name == "Nesterov":
            rho = hp["rho"]
            d = -(rho**2) * st["vel"] + (1 + rho) * eta * g
            st["vel"] = rho * st["vel"] - eta * g
            return d
        if name == "RMSProp":
            rho = hp["rho"]
            st["quad"] = rho * st["quad"] + (1 - rho) * g**2
            if hp.get("centred"):
                st["lin"] = rho * st["lin"] + (1 - rho) * g
            return eta * g / (sq(st["quad"] - st["lin"] ** 2) + eps)
        if name == "Rprop":
            (l1, l2), (G1, G2) = hp["ell"], hp["gamma"]
            p = st["g"] * g
            st["etas"] = np.where(p > 0, np.minimum(st["etas"] * l2, G2),
                                  np.where(p < 0, np.maximum(st["etas"] * l1, G1), st["etas"]))  # fmt: skip
            st["g"] = np.where(p < 0, 0.0, g)
            return st["etas"] * np.sign(st["g"])
        if name in ("Adam", "AdamW", "RAdam", "OAdam", "NAdam"):
            adam_moments(st, g, b)
            bt = st["bt"]
            mhat, vhat = st["m"] / (1 - bt[0]), st["v"] / (1 - bt[1])
            if name == "Adam":
                d = eta * mhat / (sq(vhat) + eps)
            elif name == "AdamW":
                a = mhat / (sq(vhat) + eps)
                lam = hp["lambda_"]
                d = eta * (a + lam * x) if hp.get("couple", True) else eta * a + lam * x
            elif name == "RAdam":
                rinf = 2 / (1 - b[1]) - 1
                rho = rinf - 2 * st["t"] * bt[1] / (1 - bt[1])
                if rho > 4:
                    r = sq((rho - 4) * (rho - 2) * rinf / ((rinf - 4) * (rinf - 2) * rho))
                    d = mhat / (sq(vhat) + eps) * eta * r
                else:
                    d = mhat * eta
                st["t"] += 1
            elif name == "OAdam":
                new = eta * mhat / (sq(vhat) + eps)
                d = 2 * new - st["term"]
                st["term"] = new
            else:  # NAdam
                num = b[0] * st["m"] / (1 - b[0] * bt[0]) + (1 - b[0]) * g / (1 - bt[0])
                d = num / (sq(st["v"] * b[1] / (1 - bt[1])) + eps) * eta
            st["bt"] = [bt[0] * b[0], bt[1] * b[1]]
            return d
        if name == "AdaMax":
            st["m"] = b[0] * st["m"] + (1 - b[0]) * g
            st["u"] = np.maximum(b[1] * st["u"], np.abs(g))
            d = eta / (1 - st["bt"][0]) * st["m"] / (st["u"] + eps)
            st["bt"] = [st["bt"][0] * b[0], st["bt"][1] * b[1]]
            return d
        if name == "AdaGrad":
            st["acc"] = st["acc"] + g**2
            return eta * g / (sq(st["acc"]) + eps)
        if name == "AdaDelta":
            rho = hp["rho"]
            st["acc"] = rho * st["acc"] + (1 - rho) * g**2
            d = g * sq(st["dacc"] + eps) / sq(st["acc"] + eps)
            st["dacc"] = rho * st["dacc"] + (1 - rho) * d**2
            return d
        if name == "AMSGrad":
            if "filled" not in st:  # m = v = v̂ = ϵ at the start
                st["m"][:], st["v"][:], st["vhat"][:], st["filled"] = eps, eps, eps, True
            adam_moments(st, g, b)
            st["vhat"] = np.maximum(st["vhat"], st["v"])
            return eta * st["m"] / (sq(st["vhat"]) + eps)
        if name == "AdaBelief":
            st["m"] = b[0] * st["m"] + (1 - b[0]) * g
            st["s"] = b[1] * st["s"] + (1 - b[1]) * (g - st["m"]) ** 2 + eps
            bt = st["bt"]
            d = eta * st["m"] / (1 - bt[0]) / (sq(st["s"] / (1 - bt[1])) + eps)
            st["bt"] = [bt[0] * b[0], bt[1] * b[1]]
            return d
        if name == "Lion":
            st["m"] = b[1] * g + (1 - b[1]) * st["m"]
            return eta * np.sign((b[1] - b[0]) * g + b[0] * st["m"])
        if name == "WeightDecay":
            return g + hp["lambda_"] * x
        if name == "SignDecay":
            return g + hp["lambda_"] * np.sign(x)
        if name == "ClipGrad":
            return np.clip(g, -hp["delta"], hp["delta"])
        if name == "ClipNorm":
            return g * min(hp["omega"] / np.linalg.norm(g, hp["p"]), 1)
        raise KeyError(name)

    return init, step


def np_run(parts, x, grads):
    """Run a chain of (name, hp) NumPy references; returns x after each step."""
    fns = [np_rule(n, hp) for n, hp in parts]
    states = [f[0](x) for f in fns]
    out = []
    for g in grads:
        d = g
        for (_, step), st in zip(fns, states, strict=True):
            d = step(st, x, d)
        x = x - d
        out.append(x)
    return out


def run_rule(rule, x, grads, jit=False):
    """Steps of ``rule`` from ``x``: (x after each step, final state); ``jit`` compiles ``update``."""
    state = rule.init(x)
    upd = jax.jit(rule.update) if jit else rule.update
    out = []
    for g in grads:
        u, state = upd(jnp.asarray(g, x.dtype), state, x)
        x = optax.apply_updates(x, u)
        out.append(x)
    return out, state


X0 = np.array([0.5, -1.5, 2.0, -0.25, 3.0])
GRADS = [
    np.array([0.3, -2.0, 0.7, 1.5, -0.05]),
    np.array([0.4, 1.0, 0.9, -2.5, -0.1]),
    np.array([-0.2, -3.0, 0.6, 0.5, -0.2]),
]
