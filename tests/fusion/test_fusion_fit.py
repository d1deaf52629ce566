"""A fusion trained by the loop: what it reports for each epoch is what the model computes."""

import pytest
import torch
from helpers import perturb, tiny_encoder

from adapterfleet.adapters import AdapterConfig, AdapterModel, HeadConfig, add_adapter
from adapterfleet.fusion import add_fusion, set_active_fusion, train_fusion
from adapterfleet.training import Callback, EpochReport, TrainConfig, fit


def _batches(seed: int, count: int) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        ids = torch.randint(5, 100, (4, 12), generator=generator)
        labels = torch.randn(4, generator=generator)
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels})
    return batches


class _Recompute(Callback):
    """After each epoch: the loop's dev mse beside the model's own, computed with gradients on
    in eval mode, where a fusion layer uses no cached form."""

    def __init__(self, model: torch.nn.Module, dev: list[dict[str, torch.Tensor]]) -> None:
        self.model, self.dev, self.seen = model, dev, []

    def on_epoch_end(self, report: EpochReport) -> None:
        device = next(self.model.parameters()).device
        dev = [{k: v.to(device) for k, v in b.items()} for b in self.dev]
        self.model.eval()
        with torch.enable_grad():
            preds = torch.cat([self.model(b).squeeze(-1).detach() for b in dev])
        self.model.train()
        labels = torch.cat([b["labels"] for b in dev])
        own = float(((preds - labels) ** 2).mean())
        self.seen.append((report.dev_metrics["mse"], own))


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, CUDA])])
def test_each_epochs_dev_metric_is_the_fusions_own_after_the_fused_optimizers_steps(device):
    """The dev evaluation folds the fusion once per evaluation: it must fold the weights the
    optimizer has just written (torch's fused AdamW left their version counters unmoved, and
    every epoch after the first was scored with the first epoch's fusion). On a GPU the forward
    and backward are replayed CUDA graphs, the optimizer steps eagerly between them."""
    torch.manual_seed(0)
    model = AdapterModel(tiny_encoder("bert"))
    for name in ("a", "b"):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
    perturb(list(model.encoder_model.parameters()), scale=0.05)
    add_fusion(model, "target", ["a", "b"])
    model.add_head("target", HeadConfig(head_type="regression", num_labels=1))
    set_active_fusion(model, "target")
    params = train_fusion(model, "target")
    dev = _batches(2, 2)
    recompute = _Recompute(model, dev)
    config = TrainConfig(
        learning_rate=3e-2, max_epochs=3, metric="mse", device=device, precision="fp32"
    )
    fit(model, params, _batches(1, 4), dev, config, callbacks=[recompute])
    assert len(recompute.seen) == 3
    for reported, own in recompute.seen:
        assert reported == pytest.approx(own, rel=1e-4)
    assert recompute.seen[0][1] != pytest.approx(recompute.seen[-1][1], rel=1e-2)  # it trained
