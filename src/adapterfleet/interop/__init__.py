"""Interoperability with AdapterHub `adapters` 1.x (the reference implementation): import the
adapters, fusions and heads it saved, export ours in its layout."""

from adapterfleet.interop.adapterhub import Converted, export_adapterhub, import_adapterhub
from adapterfleet.interop.reference import LAYOUTS, REFERENCE_VERSION, InteropError

__all__ = [
    "LAYOUTS",
    "REFERENCE_VERSION",
    "Converted",
    "InteropError",
    "export_adapterhub",
    "import_adapterhub",
]
