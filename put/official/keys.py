"""The authors' state-dict names and layouts mapped onto ours, key by key, for their CVPR 2022 and TPAMI 2024
models. Every key must be accounted for: renamed, fused, or a training-only copy that we never load
(docs/model.md, "The authors' checkpoints")."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from put.errors import FileMismatchError

# Their P-VQVAE training checkpoints also carry the loss module: the discriminator (mapped onto ours),
# two copies of the pretrained VGG19 trunk and the BCE target labels (dropped: constants we rebuild).
DROPPED_PREFIXES = ("loss.perceptual_loss.", "loss.style_loss.", "loss.adversarial_loss.")
DISCRIMINATOR_PREFIX = "loss.discriminator."
TRANSFORMER_CODEC_PREFIX = "content_codec."

Rule = tuple[re.Pattern, Callable[[re.Match], str]]


def _rules(table: list[tuple[str, Callable[[re.Match], str] | str]]) -> list[Rule]:
    return [(re.compile(pattern), (lambda m, r=repl: m.expand(r)) if isinstance(repl, str) else repl)
            for pattern, repl in table]


PVQVAE_RULES = _rules([
    # P-Enc: pre_layers = [Linear], res_layers.i.layers = [ReLU, Linear, ReLU, Linear],
    # post_layers = [ReLU, Linear, ReLU]
    (r"encoder\.pre_layers\.0\.(weight|bias)$", r"encoder.fc_in.\1"),
    (r"encoder\.res_layers\.(\d+)\.layers\.1\.(weight|bias)$", r"encoder.blocks.\1.fc1.\2"),
    (r"encoder\.res_layers\.(\d+)\.layers\.3\.(weight|bias)$", r"encoder.blocks.\1.fc2.\2"),
    (r"encoder\.post_layers\.1\.(weight|bias)$", r"encoder.fc_out.\1"),
    # Conv-Enc: pre_layers.i is a DownSample (its conv under `.conv`), or with downsample_layer 'conv'
    # alternating Conv2d / ReLU entries; res_layers.i.conv = [ReLU, Conv3x3, ReLU, Conv1x1]
    (r"encoder\.pre_layers\.(\d+)\.conv\.(weight|bias)$", r"encoder.down.\1.\2"),
    (r"encoder\.res_layers\.(\d+)\.conv\.1\.(weight|bias)$", r"encoder.blocks.\1.conv1.\2"),
    (r"encoder\.res_layers\.(\d+)\.conv\.3\.(weight|bias)$", r"encoder.blocks.\1.conv2.\2"),
    (r"(quant_conv|post_quant_conv)\.(weight|bias)$", r"\1.\2"),
    (r"quantize\.embedding$", "codebook.embed"),
    (r"quantize\.embedding_avg$", "codebook.embed_avg"),
    (r"quantize\.cluster_size$", "codebook.cluster_size"),
    # MSG-Dec: pre_layers = [Conv3x3], res_layers, up_layers, post_layers = [ReLU, Conv3x3]
    (r"decoder\.pre_layers\.0\.(weight|bias)$", r"decoder.conv_in.\1"),
    (r"decoder\.res_layers\.(\d+)\.conv\.1\.(weight|bias)$", r"decoder.blocks.\1.conv1.\2"),
    (r"decoder\.res_layers\.(\d+)\.conv\.3\.(weight|bias)$", r"decoder.blocks.\1.conv2.\2"),
    (r"decoder\.post_layers\.1\.(weight|bias)$", r"decoder.conv_out.\1"),
    (r"decoder\.encoder\.layers\.0\.(weight|bias)$", r"decoder.ref_in.\1"),
])


def decoder_level_rules(level_blocks: int) -> list[Rule]:
    """Their decoder's up_layers (and the reference branch's encoder.layers after its first conv) number the
    upsamplers (downsamplers) and the `level_blocks` res blocks after each in one Sequential: an upsampler's
    conv is `.deconv` (CVPR) or `.conv` (TPAMI: nearest x2, then the conv), a DownSample's `.conv` (or with
    downsample_layer 'conv' a bare Conv2d), a res block's `.conv.1` / `.conv.3`."""
    stride = level_blocks + 1

    def block(prefix: str, first: int) -> Callable[[re.Match], str]:
        def name(m: re.Match) -> str:
            level, position = divmod(int(m[1]) - first, stride)
            return f"decoder.{prefix}.{level}.{position - (1 - first)}.conv{1 if m[2] == '1' else 2}.{m[3]}"
        return name

    return _rules([
        (r"decoder\.up_layers\.(\d+)\.(?:deconv|conv)\.(weight|bias)$",
         lambda m: f"decoder.up.{int(m[1]) // stride}.{m[2]}"),
        (r"decoder\.up_layers\.(\d+)\.conv\.(1|3)\.(weight|bias)$", block("up_blocks", 0)),
        (r"decoder\.encoder\.layers\.(\d+)\.(?:conv\.)?(weight|bias)$",
         lambda m: f"decoder.ref_down.{(int(m[1]) - 1) // stride}.{m[2]}"),
        (r"decoder\.encoder\.layers\.(\d+)\.conv\.(1|3)\.(weight|bias)$", block("ref_blocks", 1)),
    ])


def level_blocks_of(state: Mapping[str, torch.Tensor]) -> int:
    """Res blocks after each upsampling, read from how their up_layers are numbered."""
    upsampler = re.compile(r"decoder\.up_layers\.(\d+)\.(?:deconv|conv)\.weight$")
    ups = sorted({int(m[1]) for key in state if (m := upsampler.match(key))})
    return ups[1] - ups[0] - 1 if len(ups) > 1 else 0


# Tried before PVQVAE_RULES for a conv encoder, whose post conv and plain pre-layers reuse P-Enc's names.
CONV_ENCODER_RULES = _rules([
    (r"encoder\.post_layers\.1\.(weight|bias)$", r"encoder.conv_out.\1"),
    # downsample_layer 'conv': Conv2d at even indices of pre_layers, ReLU between
    (r"encoder\.pre_layers\.(\d+)\.(weight|bias)$", lambda m: f"encoder.down.{int(m[1]) // 2}.{m[2]}"),
])
DISCRIMINATOR_RULES = _rules([  # EdgeConnect's conv1..conv5, each [spectral-norm Conv2d, LeakyReLU]
    (r"conv(\d)\.0\.(weight_orig|weight_u|weight_v)$", lambda m: f"net.{2 * (int(m[1]) - 1)}.{m[2]}"),
    (r"features\.0\.(weight_orig|weight_u|weight_v)$", r"net.0.\1"),  # `features` is an alias of conv1
])
TRANSFORMER_RULES = _rules([
    (r"emb_proj\.(weight|bias)$", r"input_proj.\1"),
    (r"pos_emb$", "pos_emb"),
    (r"blocks\.(\d+)\.(ln1|ln2)\.(weight|bias)$", r"blocks.\1.\2.\3"),
    (r"blocks\.(\d+)\.attn\.proj\.(weight|bias)$", r"blocks.\1.attn.proj.\2"),
    (r"blocks\.(\d+)\.mlp\.0\.(weight|bias)$", r"blocks.\1.mlp.fc.\2"),
    (r"blocks\.(\d+)\.mlp\.2\.(weight|bias)$", r"blocks.\1.mlp.proj.\2"),
    (r"layer_norm\.(weight|bias)$", r"ln_f.\1"),
    (r"to_logits\.(weight|bias)$", r"head.\1"),
    # TPAMI's ViT: norm1/norm2, a fused qkv without bias plus q_bias / v_bias, mlp.fc1/fc2, `norm`
    (r"blocks\.(\d+)\.norm([12])\.(weight|bias)$", r"blocks.\1.ln\2.\3"),
    (r"blocks\.(\d+)\.attn\.(qkv\.weight|q_bias|v_bias)$", r"blocks.\1.attn.\2"),
    (r"blocks\.(\d+)\.mlp\.fc1\.(weight|bias)$", r"blocks.\1.mlp.fc.\2"),
    (r"blocks\.(\d+)\.mlp\.fc2\.(weight|bias)$", r"blocks.\1.mlp.proj.\2"),
    (r"norm\.(weight|bias)$", r"ln_f.\1"),
])
MASK_EMBEDDING = "mask_emb"  # theirs (1, D, 1, 1), ours (D,)
# Their separate projections, fused in the order our attention splits `qkv`.
QKV = re.compile(r"blocks\.(\d+)\.attn\.(query|key|value)\.(weight|bias)$")
QKV_ORDER = ("query", "key", "value")


class KeyMappingError(FileMismatchError):
    pass


@dataclass
class Mapped:
    """Tensors under our names, and for each our name the authors' key(s) it came from (for messages)."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, tensor: torch.Tensor, source: str) -> None:
        """A second key for the same tensor (a module registered under two names) must hold equal values."""
        if name in self.tensors:
            first = self.tensors[name]
            if first.shape != tensor.shape or (not tensor.is_meta and not torch.equal(first, tensor)):
                raise KeyMappingError(f"{source} and {self.sources[name]} name the same tensor but differ")
            return
        self.tensors[name] = tensor
        self.sources[name] = source


def rename(key: str, rules: list[Rule]) -> str | None:
    for pattern, repl in rules:
        if m := pattern.match(key):
            return repl(m)
    return None


def generation_of(state: Mapping[str, torch.Tensor]) -> str:
    """cvpr2022 or tpami2024, from the decoder's upsamplers (transposed convs or 3x3 convs after a nearest x2)
    or, for a transformer's own tensors, its attention (separate query/key/value or a fused qkv)."""
    if any(re.match(r"(decoder\.up_layers\.\d+\.conv\.weight|blocks\.\d+\.attn\.qkv\.weight)$", k) for k in state):
        return "tpami2024"
    return "cvpr2022"


def is_conv_encoder(state: Mapping[str, torch.Tensor]) -> bool:
    first = state.get("encoder.pre_layers.0.weight", state.get("encoder.pre_layers.0.conv.weight"))
    return first is not None and first.dim() == 4


def infer_pvqvae_variant(state: Mapping[str, torch.Tensor], codebook_size: int, masked_size: int) -> str:
    """put, conv, one or no_ref, read from which tensors exist and the codebook's row count."""
    rows = state["quantize.embedding"].shape[0] if "quantize.embedding" in state else None
    if rows not in (codebook_size, codebook_size + masked_size):
        raise KeyMappingError(f"quantize.embedding has {rows} rows; expected {codebook_size + masked_size} (books "
                              f"of {codebook_size} and {masked_size} codes) or {codebook_size} (variant one): set "
                              f"pvqvae.codebook_size / masked_codebook_size with --model-overrides")
    found = [v for v, present in (("conv", is_conv_encoder(state)), ("one", rows == codebook_size),
                                  ("no_ref", not any(k.startswith("decoder.encoder.") for k in state))) if present]
    if len(found) > 1:
        raise KeyMappingError(f"the checkpoint combines ablations {found}; each variant changes one thing")
    return found[0] if found else "put"


def unexpected(keys: list[str], what: str) -> KeyMappingError:
    return KeyMappingError(f"unexpected keys in the {what} state dict (not part of the released model): "
                           f"{', '.join(keys)}")


def pvqvae_state(state: Mapping[str, torch.Tensor]) -> tuple[Mapped, Mapped]:
    """Their P-VQVAE keys -> (our PVQVAE state, our PatchDiscriminator state: empty without `loss.*`)."""
    rules = (CONV_ENCODER_RULES if is_conv_encoder(state) else []) + PVQVAE_RULES + \
        decoder_level_rules(level_blocks_of(state))
    ours, disc, unknown = Mapped(), Mapped(), []
    for key, value in state.items():
        if key.startswith(DROPPED_PREFIXES):
            continue
        if key.startswith(DISCRIMINATOR_PREFIX):
            target, name = disc, rename(key.removeprefix(DISCRIMINATOR_PREFIX), DISCRIMINATOR_RULES)
        else:
            target, name = ours, rename(key, rules)
        if name is None:
            unknown.append(key)
        else:
            target.add(name, value, key)
    if unknown:
        raise unexpected(unknown, "P-VQVAE")
    return ours, disc


def transformer_state(state: Mapping[str, torch.Tensor]) -> Mapped:
    """Their transformer keys (without `content_codec.*`) -> our UQTransformer state, q/k/v fused."""
    ours, parts, unknown = Mapped(), {}, []
    for key, value in state.items():
        if m := QKV.match(key):
            parts.setdefault((m[1], m[3]), {})[m[2]] = value
        elif key == MASK_EMBEDDING:
            ours.add(MASK_EMBEDDING, value.reshape(-1), key)
        elif (name := rename(key, TRANSFORMER_RULES)) is not None:
            ours.add(name, value, key)
        else:
            unknown.append(key)
    if unknown:
        raise unexpected(unknown, "transformer")
    for (block, leaf), projections in parts.items():
        sources = [f"blocks.{block}.attn.{p}.{leaf}" for p in QKV_ORDER]
        missing = [s for p, s in zip(QKV_ORDER, sources) if p not in projections]
        if missing:
            raise KeyMappingError(f"{missing[0]} missing: query, key and value are fused together")
        ours.add(f"blocks.{block}.attn.qkv.{leaf}", torch.cat([projections[p] for p in QKV_ORDER]), "+".join(sources))
    return ours


def split_transformer_checkpoint(state: Mapping[str, torch.Tensor]) -> tuple[dict, dict]:
    """(their P-VQVAE state from `content_codec.*`, the transformer's own keys)."""
    codec = {k.removeprefix(TRANSFORMER_CODEC_PREFIX): v for k, v in state.items()
             if k.startswith(TRANSFORMER_CODEC_PREFIX)}
    own = {k: v for k, v in state.items() if not k.startswith(TRANSFORMER_CODEC_PREFIX)}
    return codec, own


def check_against(mapped: Mapped, expected: Mapping[str, torch.Tensor], what: str) -> None:
    """Every tensor of our model present with its shape and nothing extra; errors name both keys and shapes."""
    missing = [k for k in expected if k not in mapped.tensors]
    extra = [mapped.sources[k] for k in mapped.tensors if k not in expected]
    if missing:
        raise KeyMappingError(f"{what}: the checkpoint has no tensor for our {', '.join(missing)}: is the variant "
                              f"or the model size right?")
    if extra:
        raise KeyMappingError(f"{what}: the checkpoint has tensors our model does not: {', '.join(extra)}")
    for key, tensor in mapped.tensors.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise KeyMappingError(
                f"{what}: {mapped.sources[key]} has shape {tuple(tensor.shape)} in the checkpoint, but our {key} "
                f"has shape {tuple(expected[key].shape)} in the model the preset and overrides describe; set the "
                f"size with --model-overrides")
