"""Weight files: a JSON config + safetensors, checked before anything is loaded."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from adapterfleet._files import follow_umask
from adapterfleet._hashing import sha256_file  # noqa: F401 - re-exported
from adapterfleet.adapters.architectures import describe_base
from adapterfleet.adapters.base_model import names_other_base, public_name
from adapterfleet.errors import UserError

FORMAT_VERSION = 1


class WeightsFileError(UserError, ValueError):
    """A weights directory is missing, corrupt, or does not fit the model it is loaded into."""


class OtherBaseError(WeightsFileError):
    """Weights trained on another architecture, hidden size or depth than the model's;
    `found`: what differs, `key=recorded` (e.g. `model_type='bert'`)."""

    def __init__(self, message: str, found: str) -> None:
        super().__init__(message)
        self.found = found


def _atomic_write(path: Path, write: Any) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(handle)
    try:
        write(tmp)
        follow_umask(tmp)  # mkstemp made it 0600
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_weights(
    directory: str | os.PathLike[str],
    config_name: str,
    config: dict[str, Any],
    weights_name: str,
    tensors: dict[str, torch.Tensor],
) -> Path:
    """Write `config_name` (JSON) and `weights_name` (safetensors) into `directory`."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    cpu = {key: t.detach().to("cpu").contiguous() for key, t in tensors.items()}
    _atomic_write(out / weights_name, lambda tmp: save_file(cpu, tmp, metadata={"format": "pt"}))
    payload = json.dumps({**config, "format_version": FORMAT_VERSION}, indent=2, sort_keys=True)
    _atomic_write(out / config_name, lambda tmp: Path(tmp).write_text(payload + "\n"))
    return out


def read_config(directory: str | os.PathLike[str], config_name: str) -> dict[str, Any]:
    path = Path(directory) / config_name
    if not Path(directory).is_dir():
        problem = "is a file" if Path(directory).exists() else "does not exist"
        raise WeightsFileError(f"{directory} {problem}; give a saved adapterfleet directory")
    if not path.is_file():
        raise WeightsFileError(f"{path} is missing; is {directory} a saved adapterfleet directory?")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise WeightsFileError(f"{path} is not valid JSON ({error}); the file is corrupt") from None
    if not isinstance(config, dict):
        raise WeightsFileError(f"{path} must hold a JSON object")
    return config


def read_weights(
    directory: str | os.PathLike[str],
    weights_name: str,
    expected: dict[str, torch.Size],
    sha256: str | None = None,
) -> dict[str, torch.Tensor]:
    """Load `weights_name`, verifying its hash (when given) and its keys and shapes."""
    path = Path(directory) / weights_name
    if not path.is_file():
        raise WeightsFileError(f"{path} is missing; the directory holds no weights")
    if sha256 is not None:
        actual = sha256_file(path)
        if actual != sha256.lower():
            raise WeightsFileError(
                f"{path} has sha256 {actual} but {sha256} was expected; re-download the file"
            )
    try:
        tensors = load_file(path)
    except (SafetensorError, OSError, ValueError) as error:
        raise WeightsFileError(f"{path} is not a readable safetensors file ({error})") from None
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise WeightsFileError(
            f"{path} does not match the model: missing {missing[:3]}, unexpected {extra[:3]}"
        )
    for key, shape in expected.items():
        if tensors[key].shape != shape:
            raise WeightsFileError(
                f"{path}: {key} has shape {tuple(tensors[key].shape)}, "
                f"the model needs {tuple(shape)}"
            )
    return tensors


def check_base(recorded: dict[str, Any], model: nn.Module, source: str) -> None:
    """Refuse weights trained on another architecture, hidden size or depth. Weights whose
    recorded base surely names another one than the model's (`names_other_base`, as the
    pipeline compares them) load with a UserWarning naming both: a moved folder is fine."""
    actual = describe_base(model)
    for key in ("model_type", "hidden_size", "num_hidden_layers"):
        if key in recorded and recorded[key] != actual[key]:
            raise OtherBaseError(
                f"{source} was trained on a base with {key}={recorded[key]!r}, "
                f"but this model has {key}={actual[key]!r}; load it into a matching base model",
                found=f"{key}={recorded[key]!r}, this base's {actual[key]!r}",
            )
    saved, ours = (public_name(str(d.get("name_or_path") or "")) for d in (recorded, actual))
    if saved and ours and names_other_base(saved, ours):
        warnings.warn(
            f"{source} was trained on the base {saved!r}, but this model is {ours!r} (the same "
            "model type, width and depth); loading it anyway. It may not have been trained "
            "for this model",
            UserWarning,
            stacklevel=3,
        )


def copy_into(module_tensors: dict[str, torch.Tensor], params: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for key, tensor in module_tensors.items():
            params[key].copy_(tensor)


def fill_or_remove(
    directory: str | os.PathLike[str],
    weights_file: str,
    tensors: Callable[[], dict[str, torch.Tensor]],
    remove: Callable[[], object],
    sha256: str | None = None,
) -> None:
    """Copy the weights saved in `directory` into a module just added to a model (`tensors()`:
    its parameters by saved key). On any mismatch or failure `remove()` takes the module out
    again, so the model is left as it was; the error is raised."""
    try:
        params = tensors()
        expected = {key: t.shape for key, t in params.items()}
        copy_into(read_weights(directory, weights_file, expected, sha256), params)
    except Exception:
        remove()
        raise
