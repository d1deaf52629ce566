"""`adapterfleet adapters` and `pull` on a real registered world: versions written `v1 @best` as
`status` writes them, metrics as numbers, and a pulled folder verified."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from adapterfleet.cli.app import app

runner = CliRunner()


def _table(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_adapters_lists_versions_as_status_writes_them(world) -> None:
    result = runner.invoke(app, ["adapters", "-c", str(world.config_path)])
    assert result.exit_code == 0, result.output
    rows = {(row["kind"], row["task"]): row for row in _table(result.output)}
    assert set(rows) == {("adapter", "fruit"), ("adapter", "water"), ("fusion", "fruit")}
    assert {row["version"] for row in rows.values()} == {"v1 @best"}
    fusion = rows[("fusion", "fruit")]
    assert fusion["metric"] == "accuracy"
    value = fusion["value"]
    assert len(value.split(".")[1]) == 4 and 0.0 <= float(value) <= 1.0


def test_pull_writes_the_verified_fusion(world, tmp_path: Path) -> None:
    dest = tmp_path / "pulled"
    result = runner.invoke(
        app, ["pull", "fruit", "-c", str(world.config_path), "--to", str(dest), "--fusion"]
    )
    assert result.exit_code == 0, result.output
    assert "(sha256 verified)" in result.output
    assert (dest / "model_adapter_fusion.safetensors").is_file()
