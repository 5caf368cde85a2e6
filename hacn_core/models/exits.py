"""Layer-wise exits of a classifier built on a residual stack (H-ACN Sec. 3.1).

A model whose ``tokens(images)`` feed ``self.stack`` (a
:class:`~hacn_core.hacn.connectivity.ResidualStack`) and whose shared ``self.head``
maps a representation to logits gets three methods from :class:`LayerwiseClassifier`:
the forward pass (optionally truncated after ``num_layers`` layers), every exit of one
pass, and the head applied to every exit (the layer-wise accuracy of Figs. 2a, 7).
The MLP-Mixer and the ViT share them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LayerwiseClassifier(nn.Module):
    """Forward, exits and layer-wise logits of ``head(stack(tokens(images)))``."""

    stack: nn.Module
    head: nn.Module

    def tokens(self, images: Tensor) -> Tensor:
        """The stack's input ``(B, N, d)`` (exit 0); every subclass defines it."""
        raise NotImplementedError

    def forward(self, images: Tensor, num_layers: int | None = None) -> Tensor:
        """Logits ``(B, classes)``; ``num_layers`` truncates the stack (a separate truncated network)."""
        return self.head(self.stack(self.tokens(images), num_layers=num_layers))

    def exits(self, images: Tensor) -> list[Tensor]:
        """The ``L + 1`` layer-wise exit representations ``(B, N, d)`` of one forward pass."""
        _, exits = self.stack(self.tokens(images), return_exits=True)
        return exits

    def layerwise_logits(self, images: Tensor) -> Tensor:
        """The shared head at every exit, ``(L + 1, B, classes)``, from one forward pass (Sec. 3.1).

        Row ``i`` is what the network predicts when it stops after layer ``i`` (row 0:
        the stack's input alone; row ``L``: ``forward(images)``). With
        ``layer_unit="sublayer"`` there are ``2L + 1`` rows.
        """
        return self.head(torch.stack(self.exits(images)))
