import pytest
import torch
from helpers import batch, hidden, perturb, tiny_encoder

from adapterfleet.adapters import AdapterConfig, AdapterModel, HeadConfig, add_adapter
from adapterfleet.adapters.modules import Bottleneck
from adapterfleet.fusion import (
    FusionConfig,
    FusionLayer,
    add_fusion,
    capture_fusion_weights,
    fusion_parameters,
    fusion_regularization_loss,
    reference_fusion,
    set_active_fusion,
    train_fusion,
)

D = 48


def _adapters(widths: list[int], seed: int = 0) -> list[Bottleneck]:
    torch.manual_seed(seed)
    adapters = [Bottleneck(D, m, "relu", 0.3) for m in widths]
    for a in adapters:
        a.requires_grad_(False)
    return adapters


def _layer(n: int, config: FusionConfig, seed: int = 1) -> FusionLayer:
    torch.manual_seed(seed)
    layer = FusionLayer(D, [f"a{i}" for i in range(n)], config, dropout=0.1).eval()
    perturb(list(layer.parameters()), seed=seed, scale=0.2)
    return layer


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).norm() / b.norm()).detach())


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("preset", ["dynamic", "static"])
def test_fast_form_equals_the_straightforward_formula(n, preset):
    adapters = _adapters([12] * n)
    layer = _layer(n, FusionConfig.preset(preset))
    q = torch.randn(4, 9, D)
    fast = layer(q, adapters)
    slow, weights = reference_fusion(layer, q, adapters)
    assert _rel_err(fast, slow) < 1e-5
    with capture_fusion_weights_of(layer) as captured:
        layer(q, adapters)
    assert _rel_err(captured[0], weights) < 1e-5


def test_fast_form_handles_adapters_of_different_widths_and_activations():
    adapters = _adapters([24, 12, 3])
    adapters[1].non_linearity = "gelu"
    layer = _layer(3, FusionConfig(temperature=2.0))
    q = torch.randn(2, 5, D)
    assert _rel_err(layer(q, adapters), reference_fusion(layer, q, adapters)[0]) < 1e-5


def test_frozen_adapters_share_the_stacked_copy_and_a_changed_weight_is_seen():
    adapters = _adapters([12, 12, 6])
    layer = _layer(3, FusionConfig())
    q = torch.randn(2, 5, D)
    before = {id(p): p.detach().clone() for a in adapters for p in a.parameters()}
    layer(q, adapters)
    stacked = layer._stacked[1]
    owner = stacked.down_w.untyped_storage().data_ptr()
    assert adapters[2].adapter_down.weight.untyped_storage().data_ptr() == owner
    assert adapters[1].adapter_up.weight.untyped_storage().data_ptr() == (
        stacked.up_w.untyped_storage().data_ptr()
    )
    for a in adapters:  # same values, same parameter objects
        for p in a.parameters():
            assert torch.equal(p, before[id(p)])
    with torch.no_grad():
        adapters[0].adapter_up.weight.mul_(3.0)
    assert _rel_err(layer(q, adapters), reference_fusion(layer, q, adapters)[0]) < 1e-5


def test_gradients_of_the_fast_form_equal_the_straightforward_ones():
    adapters = _adapters([12] * 4)
    layer = _layer(4, FusionConfig())
    q = torch.randn(3, 6, D)
    target = torch.randn(3, 6, D)
    grads = []
    for form in (lambda: layer(q, adapters), lambda: reference_fusion(layer, q, adapters)[0]):
        layer.zero_grad()
        ((form() - target) ** 2).sum().backward()
        # b_K shifts every score of a token equally, so its exact gradient is zero; the fast
        # form never touches it (None) and the straightforward one gets rounding noise.
        grads.append(
            [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in layer.parameters()]
        )
    scale = max(float(g.norm()) for g in grads[1])
    for (name, _), fast, slow in zip(layer.named_parameters(), *grads, strict=True):
        if name == "key.bias":
            assert fast.abs().max() == 0 and float(slow.norm()) < 1e-6 * scale
        else:
            assert _rel_err(fast, slow) < 1e-4, name


def test_value_starts_at_identity_and_is_regularised_towards_it():
    layer = FusionLayer(D, ["a", "b"], FusionConfig(), dropout=0.0)
    v = layer.value.weight
    assert torch.equal(v.diagonal(), torch.ones(D))
    off = v[~torch.eye(D, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, 1e-6))
    assert layer.regularization_loss().item() == pytest.approx(0.01 * (D * D - D) * 1e-12, rel=1e-3)
    with torch.no_grad():
        v.add_(0.1)
    assert layer.regularization_loss().item() == pytest.approx(0.01 * D * D * 0.01, rel=1e-2)
    assert FusionLayer(D, ["a"], FusionConfig.preset("static"), 0.0).regularization_loss() is None


def test_temperature_is_an_argument_and_forward_never_changes_it():
    adapters = _adapters([12, 12])
    layer = _layer(2, FusionConfig(temperature=5.0))
    q = torch.randn(1, 3, D)
    first = layer(q, adapters)
    assert layer.temperature == 5.0
    assert torch.equal(layer(q, adapters), first)
    with pytest.raises(ValueError, match="temperature"):
        FusionConfig(temperature=0)


class capture_fusion_weights_of:  # noqa: N801 - a tiny context manager for one bare layer
    def __init__(self, layer: FusionLayer):
        self.layer, self.captured = layer, []

    def __enter__(self):
        self.layer.record = True
        self.handle = self.layer.register_forward_hook(
            lambda m, a, o: self.captured.append(m.last_weights)
        )
        return self.captured

    def __exit__(self, *exc):
        self.layer.record = False
        self.handle.remove()


def _fused_model(n: int = 3) -> AdapterModel:
    model = AdapterModel(tiny_encoder("bert"))
    for i in range(n):
        add_adapter(model, f"task{i}", AdapterConfig(reduction_factor=4 * (1 + i % 2)))
    perturb([p for p in model.encoder_model.parameters()], scale=0.05)
    add_fusion(model, "target", [f"task{i}" for i in range(n)])
    model.add_head("target", HeadConfig(num_labels=2))
    return model


def test_model_with_fusion_computes_layer_norm_of_input_plus_fused_mix():
    model = _fused_model()
    set_active_fusion(model, "target")
    model.eval()
    slot = model.encoder_model.encoder.layer[0].output.LayerNorm
    x = torch.randn(2, 4, 32)
    fusion = slot.fusions["target"]
    adapters = [slot.adapters[n] for n in fusion.adapter_names]
    slow, _ = reference_fusion(fusion, slot.layer_norm(x), adapters)
    assert _rel_err(slot(x), slot.layer_norm(x + slow)) < 1e-5


def test_training_a_fusion_freezes_base_and_adapters():
    model = _fused_model()
    trainable = train_fusion(model, "target")
    expected = {id(p) for p in fusion_parameters(model, "target")} | {
        id(p) for p in model.heads["target"].parameters()
    }
    assert {id(p) for p in trainable} == expected
    assert {id(p) for p in model.parameters() if p.requires_grad} == expected
    logits = model(batch())
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 0]))
    loss = loss + fusion_regularization_loss(model, "target")
    loss.backward()
    fusion = model.encoder_model.encoder.layer[0].output.LayerNorm.fusions["target"]
    assert all(p.grad is not None for n, p in fusion.named_parameters() if n != "key.bias")
    assert all(p.grad is None for n, p in model.named_parameters() if ".adapters." in n)


def test_captured_weights_are_a_distribution_over_adapters_per_token():
    model = _fused_model(3)
    set_active_fusion(model, "target")
    model.eval()
    with capture_fusion_weights(model, "target") as captured:
        model(batch(size=2, length=5))
    assert sorted(captured) == [0, 1]
    weights = captured[0][0]
    assert weights.shape == (2, 5, 3)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 5))
    assert not model.encoder_model.encoder.layer[0].output.LayerNorm.fusions["target"].record


def test_fusion_refuses_missing_or_houlsby_adapters():
    model = tiny_encoder("bert")
    add_adapter(model, "p", AdapterConfig(reduction_factor=4))
    add_adapter(model, "h", AdapterConfig(architecture="houlsby", reduction_factor=4))
    with pytest.raises(ValueError, match="not in the model"):
        add_fusion(model, "f", ["p", "missing"])
    with pytest.raises(ValueError, match="not pfeiffer"):
        add_fusion(model, "f", ["p", "h"])


def test_fusion_with_a_single_adapter_matches_that_adapter_when_v_is_identity():
    model = tiny_encoder("bert")
    add_adapter(model, "p", AdapterConfig(reduction_factor=4))
    perturb(list(model.parameters()), scale=0.05)
    from adapterfleet.adapters import set_active_adapter

    set_active_adapter(model, "p")
    alone = hidden(model, batch())
    add_fusion(model, "f", ["p"], FusionConfig(value=False, regularization=False))
    set_active_fusion(model, "f")
    assert torch.allclose(hidden(model, batch()), alone, atol=1e-5)


def test_mean_weights_per_layer_sum_to_one_and_the_heatmap_is_a_png(tmp_path):
    from adapterfleet.fusion import mean_fusion_weights, plot_fusion_heatmap

    model = _fused_model(3)
    inputs = batch(size=4, length=6)
    weights = mean_fusion_weights(model, "target", [inputs, inputs])
    assert weights.shape == (2, 3)
    assert torch.allclose(weights.sum(1), torch.ones(2))
    png = plot_fusion_heatmap(weights, ["task0", "task1", "task2"], tmp_path / "f.png", "target")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_heatmap_labels_its_axes_colour_bar_average_and_the_targets_own_adapter(tmp_path):
    from adapterfleet.fusion.analysis import heatmap_figure, heatmap_title

    weights = torch.tensor([[0.2, 0.8], [0.6, 0.4]])
    fig = heatmap_figure(weights, ["other", "target"], heatmap_title("target"), target="target")
    ax, bar = fig.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("adapter", "layer")
    assert bar.get_ylabel() == "mean fusion weight"
    title = " ".join(ax.get_title().split())  # wrapped to the figure's width
    assert "dev set's tokens" in title and "per layer" in title
    ticks = {t.get_text(): t.get_fontweight() for t in ax.get_xticklabels()}
    assert ticks == {"other": "normal", "target (target)": "bold"}
    fig.savefig(tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("preset", ["dynamic", "static"])
def test_folded_inference_equals_the_training_form_and_follows_weight_changes(preset):
    adapters = _adapters([24, 12, 12])
    adapters[1].non_linearity = "gelu"
    layer = _layer(3, FusionConfig.preset(preset))
    q = torch.randn(4, 9, D)
    unfolded = layer(q, adapters)  # gradients on: the training form
    assert layer._folded is None
    with torch.no_grad():
        folded = layer(q, adapters)
    assert layer._folded is not None  # eval without gradients: the folded form
    assert _rel_err(folded, unfolded) < 1e-5
    assert _rel_err(folded, reference_fusion(layer, q, adapters)[0]) < 1e-5
    with torch.no_grad():  # a changed fusion or adapter weight is folded in again
        layer.query.weight.mul_(1.5)
        adapters[0].adapter_up.weight.mul_(2.0)
        refolded = layer(q, adapters)
        with capture_fusion_weights_of(layer) as captured:
            layer(q, adapters)
    slow, weights = reference_fusion(layer, q, adapters)
    assert _rel_err(refolded, slow) < 1e-5 and _rel_err(captured[0], weights) < 1e-5
    assert _rel_err(refolded, folded) > 1e-2  # the change did reach the output


@pytest.mark.parametrize("trainable_adapters", [False, True])
def test_an_evaluation_after_training_steps_folds_the_stepped_weights(trainable_adapters):
    """The loop evaluates the dev set between epochs: each evaluation sees the weights as the
    optimizer left them, also when their version counters did not move (torch's own fused AdamW,
    as the Hugging Face Trainer uses it; a write through `.data`)."""
    from adapterfleet.training import build_optimizer

    adapters = _adapters([12, 12, 6])
    for a in adapters:
        a.requires_grad_(trainable_adapters)
    layer = _layer(3, FusionConfig())
    q = torch.randn(4, 9, D)
    params = [p for m in (layer, *adapters) for p in m.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, 0.05, weight_decay=0.0)
    outputs = []
    for _ in range(2):
        with torch.no_grad():
            outputs.append(layer.eval()(q, adapters))
        assert _rel_err(outputs[-1], reference_fusion(layer, q, adapters)[0]) < 1e-5
        layer.train()(q, adapters).pow(2).sum().backward()
        optimizer.step()
        with torch.no_grad():  # an update its version counters do not show
            for p in params:
                p.data.add_(0.01)
    assert _rel_err(outputs[1], outputs[0]) > 1e-3


@pytest.mark.parametrize("update", ["fused AdamW", "vector_to_parameters"])
def test_a_model_kept_in_eval_mode_never_predicts_with_weights_it_had_before(update):
    """Trained in eval mode throughout (no dropout) with torch's fused AdamW, or given new
    weights by `vector_to_parameters`: neither moves a version counter, and no train()/eval()
    call drops the caches, so the evaluation after used to be the folded form of the weights
    before (0.02 off the true output after one fused step, a tester's count)."""
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    adapters = _adapters([12, 12, 6])
    layer = _layer(3, FusionConfig()).eval()
    q = torch.randn(4, 9, D)
    params = list(layer.parameters())
    optimizer = torch.optim.AdamW(params, lr=0.05, fused=True)
    with torch.no_grad():
        before = layer(q, adapters)
    if update == "fused AdamW":
        layer(q, adapters).pow(2).sum().backward()
        versions = [p._version for p in params]
        optimizer.step()
        assert [p._version for p in params] == versions  # what the caches could not see
    else:
        vector_to_parameters(parameters_to_vector(params) * 1.5, params)
    with torch.no_grad():
        after = layer(q, adapters)
    assert _rel_err(after, reference_fusion(layer, q, adapters)[0]) < 1e-5
    assert _rel_err(after, before) > 1e-3


def test_adapters_that_take_gradients_predict_through_the_cached_folded_form():
    """A loaded model predicting keeps `requires_grad` on its adapters: without gradients the
    stack and the folded form are still built once (not per call, which was also a copy from
    the host that no CUDA graph can hold), in the adapters' own storage; a change is seen."""
    adapters = _adapters([24, 12, 12])
    for a in adapters:
        a.requires_grad_(True)
    layer = _layer(3, FusionConfig())
    q = torch.randn(4, 9, D)
    with torch.no_grad():
        first = layer(q, adapters)
        stacked, folded = layer._stacked, layer._folded
        assert stacked is not None and folded is not None
        assert _rel_err(layer(q, adapters), first) == 0
        assert (layer._stacked, layer._folded) == (stacked, folded)  # the same objects
        assert _rel_err(first, reference_fusion(layer, q, adapters)[0]) < 1e-5
    own = adapters[0].adapter_down.weight.untyped_storage().data_ptr()
    assert own != stacked[1].down_w.untyped_storage().data_ptr()  # an optimizer's to step
    with torch.no_grad():
        adapters[2].adapter_down.weight.mul_(2.0)
        changed = layer(q, adapters)
    assert _rel_err(changed, reference_fusion(layer, q, adapters)[0]) < 1e-5
    assert _rel_err(changed, first) > 1e-3
    layer(q, adapters).sum().backward()  # with gradients: a stack per call, gradients reach
    assert adapters[0].adapter_down.weight.grad is not None


def test_a_folded_form_cached_under_bf16_autocast_serves_a_float32_forward_after_it():
    """A fusion evaluated under bf16 autocast (a dev evaluation on a GPU, `predict` of a model
    trained in bf16) and then run in float32 in the same process: the cached folded form is
    float32, so the float32 forward works and gives the float32 numbers."""
    adapters, layer = _adapters([24, 12, 12]), _layer(3, FusionConfig()).eval()
    q = torch.randn(4, 9, D)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = layer(q, adapters)
        assert {t.dtype for t in vars(layer._folded[1]).values() if torch.is_tensor(t)} == {
            torch.float32
        }
        full = layer(q, adapters)
    want = reference_fusion(layer, q, adapters)[0]
    assert full.dtype == torch.float32 and _rel_err(full, want) < 1e-5
    assert 1e-5 < _rel_err(half.float(), want) < 0.05  # the bf16 forward was a bf16 one


@pytest.mark.parametrize("preset", ["dynamic", "static"])
def test_training_folds_large_batches_with_the_same_outputs_and_gradients(preset):
    adapters = [a.double() for a in _adapters([24, 12, 12])]  # float64: rounding out of sight
    adapters[1].non_linearity = "gelu"
    layer = _layer(3, FusionConfig.preset(preset)).double()
    stacked = layer._stack(adapters)
    small, large = torch.randn(2, 5, D).double(), torch.randn(4, 30, D).double()
    assert not layer.folds(small, stacked) and layer.folds(large, stacked)  # M + N = 51
    for q in (small, large):
        q.requires_grad_(True)
        grad_out = torch.randn(*q.shape[:-1], D).double()
        results = []
        for form in (layer, reference_fusion):
            out = layer(q, adapters) if form is layer else reference_fusion(layer, q, adapters)[0]
            params = [p for n, p in layer.named_parameters() if n != "key.bias"]  # cancels
            results.append((out, *torch.autograd.grad((out * grad_out).sum(), [q, *params])))
        for fast, slow in zip(*results, strict=True):
            assert _rel_err(fast.detach(), slow.detach()) < 1e-12
    assert layer._folded is None  # training never caches: the weights change every step


def _saved_bytes(layer: FusionLayer, adapters: list[Bottleneck], tokens: int) -> int:
    """Bytes of the distinct storages autograd keeps for the backward of one training call."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    q = torch.randn(1, tokens, D, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        layer(q, adapters)
    return sum(storages.values())


def test_training_keeps_no_per_token_copy_of_the_weights_over_each_adapters_slice():
    # what a long-context step holds per token and layer: here M = 64, N = 4, d = 48
    adapters = _adapters([16] * 4)
    layer = _layer(4, FusionConfig.preset("dynamic")).train()
    m, n = 64, 4
    per_token = {}
    for form, (few, many) in {"unfolded": (10, 20), "folded": (300, 600)}.items():
        assert layer.folds(torch.empty(many, D), layer._stack(adapters)) == (form == "folded")
        grown = _saved_bytes(layer, adapters, many) - _saved_bytes(layer, adapters, few)
        per_token[form] = grown / (many - few) / 4  # float32 numbers
    # folded: q, the activations a (M), the scores' product (M + N), the weights and their
    # dropout mask; an M-wide copy of the weights for their product with a would add M, and
    # keeping that product's output (the output projection's input) M + N
    assert per_token["folded"] <= 2 * m + 3 * n + D, per_token
    assert per_token["unfolded"] <= 2 * m + 3 * D + 2 * n, per_token


@pytest.mark.parametrize("preset", ["dynamic", "static"])
def test_the_folded_output_of_equal_widths_trains_with_the_straightforward_gradients(preset):
    # equal widths take the output product that forms its input again in the backward
    adapters = [a.double() for a in _adapters([16, 16, 16])]
    perturb([p for a in adapters for p in a.parameters()], seed=2, scale=0.2)  # up biases too
    layer = _layer(3, FusionConfig.preset(preset)).double().train()
    layer.dropout.p = 0.0
    q = torch.randn(4, 30, D).double().requires_grad_(True)
    assert layer.folds(q, layer._stack(adapters))  # M + N = 51 < 120 tokens
    grad_out = torch.randn(4, 30, D).double()
    params = [p for n, p in layer.named_parameters() if n != "key.bias"]  # cancels
    results = []
    for form in ("fast", "straightforward"):
        out = layer(q, adapters) if form == "fast" else reference_fusion(layer, q, adapters)[0]
        results.append((out, *torch.autograd.grad((out * grad_out).sum(), [q, *params])))
    for fast, slow in zip(*results, strict=True):
        assert _rel_err(fast.detach(), slow.detach()) < 1e-12


def test_the_folded_output_under_bf16_autocast_matches_autograds_own_product():
    from adapterfleet.fusion.weighted_up import weighted_up

    torch.manual_seed(3)
    a = torch.rand(2, 40, 64).to(torch.bfloat16).requires_grad_(True)  # N = 4 adapters of 16
    s = torch.softmax(torch.randn(2, 40, 4), -1).requires_grad_(True)
    up = (torch.randn(D, 68) * 0.1).requires_grad_(True)
    grad_out = torch.randn(2, 40, D)
    results = []
    for form in ("kept factors", "autograd"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if form == "autograd":
                weighted = (a.unflatten(-1, (4, 16)) * s.unsqueeze(-1)).flatten(-2)
                out = torch.nn.functional.linear(torch.cat([weighted, s], -1), up)
            else:
                out = weighted_up(a, s, up)
        assert out.dtype == torch.bfloat16
        grads = torch.autograd.grad((out.float() * grad_out).sum(), [a, s, up])
        assert [g.dtype for g in grads] == [torch.bfloat16, torch.float32, torch.float32]
        results.append((out, *grads))
    for kept, own in zip(*results, strict=True):
        assert _rel_err(kept.float(), own.float()) < 1e-2


def _folded_parts(preset: str, device: str) -> tuple[FusionLayer, list[torch.Tensor | None]]:
    from adapterfleet.fusion.layer import Stacked

    layer = _layer(4, FusionConfig.preset(preset)).train().to(device)
    up = Stacked([a.to(device) for a in _adapters([16] * 4)]).up
    query, key, value = layer.query, layer.key, layer.value
    weights = [None if lin is None else lin.weight for lin in (query, key, value)]
    return layer, [up, weights[0], query.bias, weights[1], weights[2]]


CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)


@pytest.mark.parametrize("preset", ["dynamic", "static"])
@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_the_folded_products_formed_again_in_the_backward_have_autograds_own_gradients(
    preset, autocast, device
):
    from adapterfleet.adapters.lean_backward import formed_again
    from adapterfleet.fusion.layer import _folded_products

    layer, parts = _folded_parts(preset, device)
    params = [p for p in parts[1:] if p is not None]
    results = []
    for form in ("formed again", "kept"):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            if form == "kept":
                products = _folded_products(*parts)
            else:
                products = formed_again(_folded_products, *parts)
        draw = torch.Generator(device).manual_seed(4)  # the same gradients for both forms
        grads_out = [torch.randn(t.shape, generator=draw, device=device) for t in products]
        loss = sum((t.float() * g).sum() for t, g in zip(products, grads_out, strict=True))
        results.append((*products, *torch.autograd.grad(loss, params)))
    assert results[0][0].dtype == (torch.bfloat16 if autocast else torch.float32)
    for again, kept in zip(*results, strict=True):
        assert torch.equal(again, kept)  # the same operations, the same rounding


def test_a_folded_training_call_keeps_no_copy_of_the_weights_for_the_backward():
    # what autograd keeps besides the parameters and the stacked adapters themselves, once the
    # per-token part is taken off: the scores' and the output's bf16 matrices (d × (M + N)
    # each) and the down-projections' bf16 copy (d × M), which their per-token products need;
    # the query and key's bf16 copies, their product and the up-projections' copies are formed
    # again in the backward
    adapters = _adapters([16] * 4)
    layer = _layer(4, FusionConfig.preset("dynamic")).train()
    stacked = layer._stack(adapters)
    held = {t.untyped_storage().data_ptr() for t in (*layer.parameters(), stacked.up)}
    held |= {p.untyped_storage().data_ptr() for a in adapters for p in a.parameters()}

    def kept_bytes(tokens: int) -> int:
        storages: dict[int, int] = {}

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in held:
                storages[storage.data_ptr()] = storage.nbytes()
            return tensor

        q = torch.randn(1, tokens, D, requires_grad=True)
        keep = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
        with keep, torch.autocast("cpu", dtype=torch.bfloat16):
            layer(q, adapters)
        return sum(storages.values())

    assert layer.folds(torch.empty(300, D), stacked)
    few, many = kept_bytes(300), kept_bytes(600)
    fixed = few - (many - few) * 300 / 300
    needed = (2 * D * (64 + 4) + D * 64) * 2  # in bf16
    assert needed <= fixed <= needed + 2 * D * 2, (fixed, needed)
