"""A frozen decoder's RMSNorms, GELUs and gated MLPs keep less for the backward: stock gradients."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from helpers import DECODERS, batch, perturb, tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    adapter_parameters,
    add_adapter,
)
from adapterfleet.adapters.lean_backward import (
    LeanElementwiseForward,
    LeanGatedForward,
    keep_less_for_backward,
)
from adapterfleet.fusion import add_fusion, train_fusion

LABELS = torch.tensor([0, 1, 0])


def _stock(model: AdapterModel) -> AdapterModel:
    """`model` with transformers' own forwards back on every switched module."""
    for module in model.modules():
        if isinstance(module.__dict__.get("forward"), LeanElementwiseForward | LeanGatedForward):
            del module.forward
    return model


def _fusion_model(family: str, dtype: torch.dtype = torch.float32, **shape: int) -> AdapterModel:
    model = AdapterModel(tiny_encoder(family, **shape).to(dtype))
    for seed, name in enumerate(("a", "b")):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
        perturb(adapter_parameters(model, name), seed=seed, scale=0.05)
    add_fusion(model, "t", ["a", "b"])
    model.add_head("t", HeadConfig(num_labels=2, pooling="last"))
    return model


def _gradients(model: AdapterModel, autocast: bool = False) -> list[torch.Tensor]:
    trainable = train_fusion(model, "t")
    model.train()
    torch.manual_seed(0)  # the same dropout masks on both sides
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(batch())
    torch.nn.functional.cross_entropy(logits.float(), LABELS).backward()
    return [p.grad for p in trainable]


def _relative_error(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours - theirs).norm() / theirs.norm())


@pytest.mark.parametrize("family", DECODERS)
def test_a_bf16_base_under_autocast_has_the_stock_gradients_bit_for_bit(family):
    # the backward forms the norms and products again under the forward's autocast state
    lean = _fusion_model(family, torch.bfloat16)
    stock = _stock(_fusion_model(family, torch.bfloat16))
    assert keep_less_for_backward(copy.deepcopy(stock)) > 0
    pairs = zip(_gradients(lean, autocast=True), _gradients(stock, autocast=True), strict=True)
    compared = 0
    for ours, theirs in pairs:
        assert (ours is None) == (theirs is None)
        if theirs is not None:
            assert ours.dtype == theirs.dtype == torch.float32
            assert torch.equal(ours, theirs)
            compared += 1
    assert compared >= 10


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_bf16_base_on_cuda_under_autocast_has_the_stock_gradients_bit_for_bit():
    # CUDA's autocast runs pow and rsqrt in float32: the backward forms them again the same way
    lean = _fusion_model("llama", torch.bfloat16).cuda()
    stock = _stock(_fusion_model("llama", torch.bfloat16)).cuda()
    grads = []
    for model in (lean, stock):
        trainable = train_fusion(model, "t")
        model.eval()  # no dropout: both steps draw nothing
        inputs = {key: value.cuda() for key, value in batch().items()}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inputs)
        torch.nn.functional.cross_entropy(logits.float(), LABELS.cuda()).backward()
        grads.append([p.grad for p in trainable if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) >= 10
    for ours, theirs in zip(*grads, strict=True):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3_text"])
def test_a_float32_base_has_the_stock_gradients_up_to_the_order_of_a_sum(family):
    # in float32 the norm's upcast is the input itself, so its two uses and the residual add
    # their gradients in one sum, whose order differs between the two graphs
    lean = _gradients(_fusion_model(family))
    stock = _gradients(_stock(_fusion_model(family)))
    errors = [_relative_error(o, t) for o, t in zip(lean, stock, strict=True) if t is not None]
    assert len(errors) >= 10 and max(errors) < 1e-5, errors


def _saved_bytes(model: AdapterModel, length: int) -> int:
    """What autograd keeps, from the forward to the backward, of the frozen base's step on
    3 × `length` tokens (its gradient reaching the embeddings): the bytes of distinct storages
    packed, the weights aside."""
    model.requires_grad_(False)
    embeddings = model.encoder_model.get_input_embeddings()
    hook = embeddings.register_forward_hook(lambda module, args, out: out.requires_grad_())
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, tuple[torch.Tensor, int]] = {}  # held, so no address is used twice

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            storages[storage.data_ptr()] = (tensor, storage.nbytes())
        return tensor

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        hidden = model.encoder_model(**batch(length=length)).last_hidden_state
    hook.remove()
    hidden.float().square().sum().backward()
    return sum(nbytes for _, nbytes in storages.values())


def test_a_bf16_llama_keeps_an_mlp_wide_tensor_and_a_float32_stream_less_per_layer_token():
    hidden, intermediate, layers = 32, 256, 2
    shape = {"hidden_size": hidden, "intermediate_size": intermediate}
    per_token = {}
    for name, model in {
        "lean": AdapterModel(tiny_encoder("llama", **shape).to(torch.bfloat16)),
        "stock": _stock(AdapterModel(tiny_encoder("llama", **shape).to(torch.bfloat16))),
    }.items():
        per_token[name] = (_saved_bytes(model, 40) - _saved_bytes(model, 20)) / (3 * 20)
    # per layer, stock keeps the MLP's activation output (bf16) beside its input and the
    # up-projection, and each norm's input upcast to float32 with its reciprocal root, where
    # the lean norm keeps its bf16 input alone; one more norm ends the model
    norm = hidden * 4 + 4 - hidden * 2
    assert per_token["stock"] - per_token["lean"] == layers * (intermediate * 2 + 2 * norm) + norm


def test_a_bf16_gpt2_keeps_three_mlp_wide_tensors_less_per_layer_token():
    intermediate, layers = 256, 2
    per_token = {}
    for name, model in {
        "lean": AdapterModel(tiny_encoder("gpt2", intermediate_size=intermediate).bfloat16()),
        "stock": _stock(
            AdapterModel(tiny_encoder("gpt2", intermediate_size=intermediate).bfloat16())
        ),
    }.items():
        per_token[name] = (_saved_bytes(model, 40) - _saved_bytes(model, 20)) / (3 * 20)
    # gelu_new keeps its input, tanh's output, half the input and one plus tanh's output; the
    # lean form its input alone
    assert per_token["stock"] - per_token["lean"] == layers * 3 * intermediate * 2, per_token


def _nodes(output: torch.Tensor) -> set[str]:
    """The names of the autograd nodes behind `output`."""
    names, stack, seen = set(), [output.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_a_norm_whose_weight_trains_takes_the_stock_path():
    model = _fusion_model("llama")
    norm = model.encoder_model.norm
    assert isinstance(norm.__dict__["forward"], LeanElementwiseForward)
    train_fusion(model, "t")
    model.train()
    assert "_FormedAgainBackward" in _nodes(model(batch()))
    # a fully fine-tuned base: the norm's weight trains, so its stock forward runs and the
    # weight has a gradient (the lean node would give it none)
    model.requires_grad_(True)
    torch.nn.functional.cross_entropy(model(batch()), LABELS).backward()
    assert norm.weight.grad is not None and norm.weight.grad.abs().sum() > 0


class LlamaMLP(torch.nn.Module):
    """Remote code's module of a known name whose forward is its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_only_transformers_own_classes_are_switched():
    model = torch.nn.Sequential(LlamaMLP(), torch.nn.LayerNorm(4))
    assert keep_less_for_backward(model) == 0
    assert "forward" not in model[0].__dict__


def test_the_lean_forwards_survive_pickling_and_are_switched_once():
    model = _fusion_model("qwen2")
    assert keep_less_for_backward(model.encoder_model) == 0
    copied = pickle.loads(pickle.dumps(model))
    mlp = copied.encoder_model.layers[0].mlp.inner  # the adapter slot wraps the MLP
    assert isinstance(mlp.__dict__["forward"], LeanGatedForward)
    assert mlp.__dict__["forward"].module is mlp
    with torch.no_grad():
        assert torch.equal(model.eval()(batch()), copied.eval()(batch()))
