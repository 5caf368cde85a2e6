"""The backbones: networks built from a residual rule and blocks, shared by the papers' studies.

Every backbone takes its residual rule, named as the rules of
:class:`~hacn_core.hacn.connectivity.ResidualStack`, and, where it holds MLPs,
its MLP kind, so that one constructor call composes the three papers:
``MLPMixer(rule="hacn", mlp="adaptive")`` is an H-ACN Mixer whose channel MLPs
learn their width (AWNN).

- ``mixer``       ``MLPMixer``, the MLP-Mixer (H-ACN Sec. 3.1, Appendix A): any ``ResidualStack``
                  rule (``rule=``, ``hacn`` by default); MLP kinds ``mlp=`` (channel MLPs) and
                  ``token_mlp=`` (token MLPs), all kinds.
                  ``DenseMixer``, the DenseNet-style Mixer (H-ACN Appendix B, Fig. 7): concatenation
                  instead of a rule; MLP kinds ``fixed``, ``adaptive``.
- ``transformer`` the pre-LN transformer block as one H-ACN layer (``f = t + c``, ``parts(x)`` for the
                  ``hacn_code_vit`` rule), causal SDPA with RoPE, shared by the two models below.
- ``vit``         ``ViT``, the simple ViT of Beyer et al. (2022) (H-ACN Sec. 3.3): 2-d sincos positions,
                  global average pooling; any ``ResidualStack`` rule; MLP kinds ``mlp=``, all kinds.
- ``decoder``     ``GPTDecoder``, the GPT-2 decoder with RoPE of H-ACN Sec. 3.4 / Table 4 (208.54M:
                  bias-free, tied embeddings); any rule; layer-wise perplexity from one pass, chunked.
- ``resnet``      ``preact_resnet`` / ``wide_resnet``, pre-activation ResNets and WRNs for CIFAR
                  (Residual Gates Sec. 3.2): rules ``resnet``, ``gated`` (``rule=``, or ``gated=True``).
- ``fc``          ``mnist_fc``, fully connected MNIST networks (Residual Gates Sec. 3.1): rules
                  ``plain``, ``resnet``, ``gated_plain``, ``gated`` (``rule=``, or ``kind=``).
- ``stacked_fc``  ``StackedFCNet``, many ``fc`` networks trained as one batched model (seeds and
                  settings side by side), each member with its own rule.
- ``resnet20``    ``ResNet20``, the post-activation CIFAR ResNet-20 of He et al. (2016) whose classifier
                  is a fixed or adaptive MLP (AWNN App. C.2, Table 4; ``head=``).
- ``gin``         ``GIN``, the Graph Isomorphism Network whose MLPs are an MLP kind (AWNN App. C.4,
                  Table 5; ``mlp=``, ``fixed`` or ``adaptive``).
- ``seq2seq``     ``Seq2SeqTransformer``, the encoder-decoder Transformer whose FFNs are an MLP kind
                  (AWNN App. C.3; ``ffn=``, ``fixed`` or ``adaptive``).
- ``mlp``         the MLP kinds below.

MLP kinds (``mlp``: :data:`~hacn_core.models.mlp.MLP_KINDS`, built by
:func:`~hacn_core.models.mlp.make_mlp` or passed as ``mlp_layer(kind, **options)``
or any callable ``(in_features, hidden, out_features, *, dropout) -> nn.Module``):

- ``fixed``     ``Linear -> GELU -> Linear``, the Mixer's MLP (H-ACN Appendix A)
- ``adaptive``  AWNN's ``AdaptiveMLP``: one hidden layer whose width is learned (AWNN Sec. 3.1, Eq. 11-14)
- ``gated``     the fixed MLP times a scalar gate ``g(k)`` (Residual Gates Sec. 2.2), for MLPs
                that are the branch of a residual sum (the Mixer's sub-layers, not the DenseMixer)

:func:`build_model` builds any backbone by name (:data:`MODEL_NAMES`).
"""

from __future__ import annotations

from typing import Any

from torch import nn

MODEL_NAMES: tuple[str, ...] = (
    "mnist_fc", "preact_resnet", "wide_resnet", "mlp_mixer", "dense_mixer", "vit", "gpt_decoder", "resnet20", "gin",
    "seq2seq",
)


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """Build the backbone ``name`` (one of ``MODEL_NAMES``) from keyword arguments.

    ``build_model("mnist_fc", kind="gated_resnet", depth=100)``,
    ``build_model("wide_resnet", depth=28, width=10, dropout=0.3, gated=True)``,
    ``build_model("mlp_mixer", rule="hacn", mlp="adaptive")`` (keyword arguments
    are fields of ``MixerConfig`` / ``DenseMixerConfig`` / ``ViTConfig`` / ``DecoderConfig``),
    ``build_model("resnet20", head="adaptive")``,
    ``build_model("gin", in_features=37, num_classes=2, mlp="adaptive")`` (fields of ``ResNet20Config``,
    ``GINConfig``, ``TransformerConfig``).
    """
    # Imported here so that importing the package stays cheap.
    if name == "mnist_fc":
        from hacn_core.models.fc import mnist_fc

        return mnist_fc(**kwargs)
    if name == "preact_resnet":
        from hacn_core.models.resnet import preact_resnet

        return preact_resnet(**kwargs)
    if name == "wide_resnet":
        from hacn_core.models.resnet import wide_resnet

        return wide_resnet(**kwargs)
    if name == "mlp_mixer":
        from hacn_core.models.mixer import MLPMixer

        return MLPMixer(**kwargs)
    if name == "dense_mixer":
        from hacn_core.models.mixer import DenseMixer

        return DenseMixer(**kwargs)
    if name == "vit":
        from hacn_core.models.vit import ViT

        return ViT(**kwargs)
    if name == "gpt_decoder":
        from hacn_core.models.decoder import GPTDecoder

        return GPTDecoder(**kwargs)
    if name == "resnet20":
        from hacn_core.models.resnet20 import ResNet20

        return ResNet20(**kwargs)
    if name == "gin":
        from hacn_core.models.gin import GIN

        return GIN(**kwargs)
    if name == "seq2seq":
        from hacn_core.models.seq2seq import Seq2SeqTransformer

        return Seq2SeqTransformer(**kwargs)
    raise ValueError(f"name={name!r} is not a model; allowed: {', '.join(MODEL_NAMES)}")
