"""What is checked of a base model before anything trains on it, each refused in one line: its
kind (encoder-decoder models are not trained on), its checkpoint's files (a safetensors file cut
short, a pickle holding more than tensors: never unpickled with its code) and that the
checkpoint holds every weight of the model its config.json describes (transformers would leave
the rest at random values, in a base that stays frozen).

`check_checkpoint` runs when a pipeline or a single run is validated, on the files' headers (no
tensor is read); `load_checked` is the load itself, which every command and trial goes through.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapterfleet.adapters.base_model import BaseModelError

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
SHOWN = 3  # names of missing weights a refusal shows
_REPORT_LOGGER = "transformers.modeling_utils"  # where transformers logs its LOAD REPORT


def refuse_encoder_decoder(name: str, model_config: Any) -> None:
    """An encoder-decoder model (T5, BART) runs only with decoder inputs; the heads read one
    stack of hidden states."""
    if getattr(model_config, "is_encoder_decoder", False):
        kind = getattr(model_config, "model_type", "?")
        raise BaseModelError(
            f"base_model: {name} is an encoder-decoder model ({kind}), and adapterfleet trains "
            "on encoder-only or decoder-only bases; give one of those (the README's model "
            "families)"
        )


def checkpoint_files(folder: Path) -> list[Path]:
    """The files transformers loads the weights of `folder` from: safetensors before the pickle,
    one file before the shards an index names."""
    for single, index in (WEIGHT_FILES[:2], WEIGHT_FILES[2:]):
        if (folder / single).is_file():
            return [folder / single]
        if (folder / index).is_file():
            try:
                shards = json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"]
                return [folder / shard for shard in sorted(set(shards.values()))]
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
                raise _corrupt(folder / index, error) from None
    return []


def checkpoint_names(folder: Path) -> set[str]:
    """The names of the tensors the checkpoint in `folder` holds, from the files' headers (a
    pickle is read onto the meta device: no tensor's data); a file that cannot be read is
    refused."""
    import torch
    from safetensors import SafetensorError, safe_open

    names: set[str] = set()
    for file in checkpoint_files(folder):
        try:
            if file.suffix == ".safetensors":
                with safe_open(str(file), framework="pt") as opened:
                    names.update(opened.keys())
                continue
            tensors = torch.load(file, map_location="meta", weights_only=True)
        except pickle.UnpicklingError as error:
            raise _pickled_code(file, error) from None
        except (SafetensorError, OSError, RuntimeError, EOFError, ValueError) as error:
            raise _corrupt(file, error) from None
        if not isinstance(tensors, dict):
            raise _corrupt(file, TypeError(f"it holds a {type(tensors).__name__}, not tensors"))
        names.update(str(key) for key in tensors)
    return names


def check_checkpoint(name: str, folder: Path, model_config: Any) -> None:
    """Before anything starts: the checkpoint's files can be read, and hold a weight of each
    name the model has (after the prefix of a task model's checkpoint, `bert.`, `model.`). A
    name not found is settled by loading the base (`load_checked`): transformers also renames
    old checkpoints' weights, which a comparison of names does not follow."""
    from adapterfleet.adapters.architectures import skeleton

    names = checkpoint_names(folder)
    try:
        model = skeleton(model_config)
    except (ValueError, TypeError, OSError):
        return  # refused with its reason where the layout is checked
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    found = {key.removeprefix(prefix) for key in names}
    if any(key not in found for key in _weights(model)):
        from adapterfleet.adapters.base_model import load_encoder

        load_encoder(name)


def load_checked(path: str, name: str, **kwargs: Any) -> Any:
    """`AutoModel.from_pretrained(path)`, refusing in one line an encoder-decoder model, a
    checkpoint file that cannot be read, and weights of the model that the checkpoint lacks;
    transformers' LOAD REPORT is held back while the refusal is decided (then logged as
    before)."""
    from transformers import AutoModel

    with _held_load_report() as held:
        try:
            model, info = AutoModel.from_pretrained(path, output_loading_info=True, **kwargs)
        except Exception:
            unreadable = _unreadable(Path(path))  # the file and why, where one cannot be read
            if unreadable is not None:
                raise unreadable from None
            held.release()
            raise
        refuse_encoder_decoder(name, model.config)
        missing = sorted(set(info.get("missing_keys", ())) & _weights(model))
        if missing:
            raise _missing(name, missing)
        held.release()
    return model


def _unreadable(folder: Path) -> BaseModelError | None:
    try:
        if folder.is_dir():
            checkpoint_names(folder)
    except BaseModelError as error:
        return error
    return None


def _weights(model: Any) -> set[str]:
    """The model's parameters a checkpoint has to hold: not its pooler, which AutoModel builds
    for BERT-like encoders and nothing here reads (checkpoints saved without one are common),
    nor buffers, which the model makes itself (position ids)."""
    return {name for name, _ in model.named_parameters() if name.split(".")[0] != "pooler"}


def _missing(name: str, missing: list[str]) -> BaseModelError:
    shown = ", ".join(missing[:SHOWN])
    if len(missing) > SHOWN:
        shown += f" and {len(missing) - SHOWN} more"
    return BaseModelError(
        f"base_model: {name}: {len(missing)} weights of the model its config.json describes are "
        f"not in its checkpoint ({shown}), and would stay random in the frozen base; give it "
        "the config.json that matches its weights (the one they were saved with)"
    )


def _pickled_code(file: Path, error: BaseException) -> BaseModelError:
    """torch's advice ("re-run with weights_only=False") would run the file's code: say the
    opposite."""
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
    what = f" (a {found.group(1)})" if found else ""
    return BaseModelError(
        f"base_model: {file} holds more than tensors{what}, so it is not loaded (never load it "
        "with weights_only=False: that runs the code the pickle names); save the model as "
        "safetensors (save_pretrained) from a source you trust"
    )


def _corrupt(file: Path, error: BaseException) -> BaseModelError:
    text = str(error).strip()
    why = text.splitlines()[0] if text else type(error).__name__
    return BaseModelError(
        f"base_model: {file} is incomplete or corrupt ({why}); save the model again "
        "(save_pretrained) or download it again"
    )


class _Held(logging.Filter):
    """Holds back transformers' LOAD REPORT records; `release` logs them as they were."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger, self.records = logger, []

    def filter(self, record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in str(record.msg):
            self.records.append(record)
            return False
        return True

    def release(self) -> None:
        self.logger.removeFilter(self)
        for record in self.records:
            self.logger.handle(record)
        self.records = []


@contextlib.contextmanager
def _held_load_report() -> Iterator[_Held]:
    logger = logging.getLogger(_REPORT_LOGGER)
    held = _Held(logger)
    logger.addFilter(held)
    try:
        yield held
    finally:
        logger.removeFilter(held)
