"""adapterfleet: fleets of bottleneck adapters and AdapterFusion, on Ray, tracked in MLflow."""

__version__ = "0.1.0"
