"""Parameter roles: which parameters are scalars that steer the architecture.

Optimizers treat parameters by role (``hacn_core.engine.optim`` builds parameter groups
from them): the scalar mixing weights of H-ACN (``a_i``), the residual gates'
``k``, the depth-adaptive LayerNorm gains and the AWNN rates are usually kept out
of weight decay, while the residual-gates paper's "k decay" ablation puts ``k``
back in. A module marks such a parameter once, where it creates it::

    self.k = tag(nn.Parameter(torch.ones(())), "gate")

Roles
-----
``gate``    residual gate ``k`` (Residual Gates, Sec. 2.2)
``mixing``  H-ACN / ACN residual weights ``a_i`` and other scalar mixing weights
``norm_gain`` depth-adaptive LayerNorm gains (H-ACN Eq. 7)
``rate``    AWNN rate ``nu`` of the width distribution (AWNN Eq. 12)
``norm``    weights of normalisation layers (found from the module type)
``bias``    biases (found from the name)
``weight``  everything else
"""

from __future__ import annotations

from collections.abc import Iterator

from torch import nn

ROLE_ATTR = "_hacn_role"
TAGGED_ROLES: tuple[str, ...] = ("gate", "mixing", "norm_gain", "rate")
ROLES: tuple[str, ...] = TAGGED_ROLES + ("norm", "bias", "weight")

_NORM_TYPES = (
    nn.modules.batchnorm._NormBase,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.LocalResponseNorm,
    nn.RMSNorm,
)


def tag(param: nn.Parameter, role: str) -> nn.Parameter:
    """Mark ``param`` with ``role`` (one of ``TAGGED_ROLES``) and return it."""
    if role not in TAGGED_ROLES:
        raise ValueError(f"role={role!r} is not a taggable role; allowed: {', '.join(TAGGED_ROLES)}")
    setattr(param, ROLE_ATTR, role)
    return param


def named_parameter_roles(model: nn.Module) -> Iterator[tuple[str, nn.Parameter, str]]:
    """Yield ``(name, parameter, role)`` for every trainable parameter of ``model``.

    A tag wins; otherwise parameters owned directly by a normalisation layer are
    ``norm``, names ending in ``bias`` are ``bias`` and the rest ``weight``.
    Shared parameters are reported once.
    """
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for local_name, param in module.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            name = f"{module_name}.{local_name}" if module_name else local_name
            role = getattr(param, ROLE_ATTR, None)
            if role is None:
                if isinstance(module, _NORM_TYPES):
                    role = "norm"
                elif local_name.endswith("bias"):
                    role = "bias"
                else:
                    role = "weight"
            yield name, param, role
