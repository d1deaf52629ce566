"""Two processes opening the same fresh SQLite store at once both succeed (one creates the
tables, the other waits for it) instead of one failing with 'table ... already exists'."""

import subprocess
import sys

SCRIPT = (
    "import sys; from adapterfleet.registry import ensure_experiment; "
    "print(ensure_experiment(sys.argv[1], 'shared'))"
)


def test_two_processes_create_a_fresh_store_together(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    assert len({out.strip() for out, _ in outputs}) == 1  # one experiment, the same id
