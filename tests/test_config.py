import dataclasses
from pathlib import Path

import pytest

from adapterfleet.config import ConfigError, TaskGrid, load_config

ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "t.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    path = tmp_path / "pipe.yaml"
    path.write_text(text)
    return path


BASE = """name: p
data_root: .
tasks:
  a: {train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}
  b: {train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}
"""


def test_shipped_configs_load():
    glue = load_config(ROOT / "configs" / "glue.yaml")
    assert glue.name == "glue"
    assert sorted(glue.tasks) == ["mnli", "mrpc", "qqp", "rte", "sst2", "stsb"]
    assert glue.adapters.reduction_factors == (2, 16, 64)
    assert glue.adapters.training_for("stsb").metric == "pearson"  # regression: its default
    assert glue.adapters.training_for("rte") == glue.adapters.training  # hash unchanged
    paper = load_config(ROOT / "configs" / "glue-fusion.yaml")
    assert sorted(paper.tasks) == sorted(set(glue.tasks) - {"stsb"})
    assert paper.fusion.targets == {"rte": paper.adapter_tasks, "mrpc": paper.adapter_tasks}
    assert paper.fusion.fusion_seeds == paper.adapters.seeds == paper.baselines.seeds == (0, 1, 2)
    cpu = load_config(ROOT / "configs" / "glue-fusion.yaml", ["budget=cpu"])
    assert cpu.name == "glue-fusion-cpu" and cpu.baselines.seeds == (0,)
    assert cpu.fusion.fusion_seeds == cpu.adapters.seeds == (0, 1, 2)  # kept for the targets
    assert "tasks.rte.max_train_examples" not in cpu.budget_changes  # targets kept whole
    full = load_config(ROOT / "configs" / "glue-fusion.yaml", ["budget=full"])
    assert full.name == "glue-fusion-full" and full.adapters == paper.adapters


def test_defaults_are_the_papers_and_overrides_apply(tmp_path):
    config = load_config(_write(tmp_path, BASE + "fusion: {targets: {a: all}}\n"))
    assert config.adapters.training.learning_rate == 1e-4
    assert config.adapters.training.max_epochs == 30
    assert config.fusion.training.learning_rate == 5e-5
    assert config.fusion.targets == {"a": ("a", "b")}
    assert config.registry_prefix == "p"
    changed = load_config(
        tmp_path / "pipe.yaml",
        [
            "adapters.learning_rates=[1e-3, 3e-3]",
            "adapters.training.max_epochs=2",
            "adapters.task_training.b.max_epochs=7",
        ],
    )
    assert changed.adapters.learning_rates == (1e-3, 3e-3)
    assert changed.adapters.training_for("a").max_epochs == 2
    assert changed.adapters.training_for("b").max_epochs == 7


def test_a_task_grid_replaces_the_stage_grid_for_its_task_only(tmp_path):
    text = BASE + "adapters: {reduction_factors: [16], learning_rates: [1e-3]}\n"
    config = load_config(
        _write(tmp_path, text),
        [
            "adapters.task_grid.b.reduction_factors=[2, 4]",
            "adapters.task_grid.b.learning_rates=1e-4",
        ],
    )
    stage = config.adapters
    assert stage.grid_for("a") == TaskGrid((16,), (1e-3,))
    assert stage.grid_for("b") == TaskGrid((2, 4), (1e-4,))
    only_lr = load_config(tmp_path / "pipe.yaml", ["adapters.task_grid.b.learning_rates=[0.1]"])
    assert only_lr.adapters.grid_for("b") == TaskGrid((16,), (0.1,))  # the other axis is kept


@pytest.mark.parametrize(
    ("extra", "overrides", "message"),
    [
        ("adapter: {}\n", [], r"unknown key\(s\) \['adapter'\]"),
        ("", ["adapters.reduction_factors=[0]"], "adapters.reduction_factors"),
        ("", ["adapters.training.learning_rate=fast"], "adapters.training.learning_rate"),
        ("", ["adapters.training.warmup_ratio=2"], "warmup_ratio"),
        ("fusion: {targets: {c: all}}\n", [], r"fusion.targets: unknown task\(s\) \['c'\]"),
        ("", ["adapters.tasks=[a, a]"], "listed twice"),
        ("", ["resources.gpu=1.5"], "resources"),
        ("", ["name=bad name"], "name"),
        ("", ["adapters.architecture=lora"], "adapters.architecture"),
        ("", ["adapters.search=random"], r"adapters.search: 'random' is unknown; use grid or"),
        ("", ["adapters.scheduler=pbt"], r"adapters.scheduler: 'pbt' is unknown; use fifo or"),
        ("", ["adapters.num_samples=4"], "adapters.num_samples: only used with adapters.search"),
        ("", ["adapters.search=optuna", "adapters.num_samples=0"], "adapters.num_samples"),
        ("", ["adapters.asha_grace_period=2"], "only used with adapters.scheduler: asha"),
        ("", ["adapters.scheduler=asha", "adapters.asha_reduction=1"], "adapters.asha_reduction"),
        (
            "",
            ["adapters.scheduler=asha", "adapters.asha_grace_period=40"],
            "adapters.asha_grace_period: 40 is more than the 30 max_epochs",
        ),
        (
            "",
            ["adapters.search=optuna", "adapters.learning_rate_range=[0.01, 0.001]"],
            "adapters.learning_rate_range: expected 0 < low < high",
        ),
        (
            "",
            [
                "adapters.search=optuna",
                "adapters.learning_rates=[0.01]",
                "adapters.learning_rate_range=[0.001, 0.01]",
            ],
            "not both",
        ),
        (
            "",
            ["adapters.scheduler=asha", "adapters.task_training.b.metric=pearson"],
            "adapters.task_training.b.metric: task 'b': 'pearson' does not fit a classification "
            "task; metrics for classification tasks: accuracy, f1, f1_macro, f1_micro, matthews",
        ),
        ("", ["adapters.task_grid.c.reduction_factors=[2]"], r"adapters.task_grid: unknown task"),
        (
            "",
            ["adapters.task_grid.b.epochs=[2]"],
            r"adapters.task_grid.b: unknown key\(s\) \['epochs'\]; allowed: reduction_factors",
        ),
        ("", ["baselines.systems=[]"], "baselines.systems: needs at least one value"),
        ("", ["adapters.reduction_factors=[]"], "adapters.reduction_factors: needs at least one"),
        (
            "",
            ["adapters.task_grid.b.learning_rates=[]"],
            "adapters.task_grid.b.learning_rates: needs at least one value",
        ),
        (
            "",
            ["adapters.task_grid.b.reduction_factors=[0]"],
            "adapters.task_grid.b.reduction_factors",
        ),
        (
            "",
            ["adapters.search=optuna", "adapters.task_grid.b.learning_rates=[0.1]"],
            "adapters.task_grid: only used with adapters.search: grid",
        ),
        ("", ["fusion.seeds=[1, 1]"], r"fusion.seeds: a seed is listed twice in \[1, 1\]"),
        ("", ["fusion.seeds=[]"], "fusion.seeds: needs at least one seed"),
        (
            "",
            ["baselines.systems=[head, lora]"],
            r"baselines.systems: unknown system\(s\) \['lora'\]",
        ),
        ("", ["baselines.tasks=[c]"], r"baselines.tasks: unknown task\(s\) \['c'\]"),
        ("", ["baselines.systems=[fusion-mt-a]"], "fusion-mt-a needs mt-a in the list too"),
        (
            "fusion: {targets: {a: all}}\n",
            ["baselines.systems=[mt-a, fusion-mt-a]", "baselines.tasks=[a, b]"],
            r"fusion-mt-a fuses the adapters of fusion.targets.<task>, and \['b'\] have none",
        ),
        (
            "",
            ["adapters.tasks=[a]", "baselines.systems=[mt-a]", "baselines.tasks=[b]"],
            r"baselines.tasks: \['b'\] are not adapter tasks",
        ),
        (
            "",
            ["baselines.systems=[head]", "baselines.system_training.full.max_epochs=2"],
            r"baselines.system_training: \['full'\] not in baselines.systems",
        ),
        (
            "",
            ["baselines.systems=[head]", "baselines.training.max_epochs=0"],
            "baselines.training.max_epochs must be an integer >= 1",
        ),
        (
            "",
            ["adapters.task_training.b.min_epochs=0"],
            "adapters.task_training.b.min_epochs must be an integer >= 1, got 0",
        ),
        (
            "",
            ["fusion.training.min_epoch=4"],
            r"fusion.training: unknown key\(s\) \['min_epoch'\] \(did you mean 'min_epochs'\?\)",
        ),
        ("", ["budget=cpu"], "budget: 'cpu' is not declared in budgets; declared: none"),
        (
            "budgets: {small: {adapters: {seeds: [0, 0]}}}\n",
            ["budget=small"],
            "adapters.seeds: a seed is listed twice",
        ),
        ("budgets: {small: {budget: big}}\n", ["budget=small"], "cannot set budget or budgets"),
        # issue #22: every range and cross-field rule, before anything starts
        (
            "",
            ["adapters.learning_rates=[0.001, -0.01]"],
            "adapters.learning_rates: expected a number > 0",
        ),
        (
            "",
            ["adapters.learning_rates=[.inf]"],
            "adapters.learning_rates: expected a finite number",
        ),
        (
            "",
            ["adapters.task_grid.b.learning_rates=[0]"],
            "task_grid.b.learning_rates: expected a number > 0",
        ),
        ("", ["adapters.reduction_factors=[16, 16]"], "16 is listed twice"),
        ("", ["resources.cpu=.nan"], "resources.cpu: expected a finite number"),
        ("", ["resources.gpu=.inf"], "resources.gpu: expected a finite number"),
        (  # passed, then Ray's scheduler failed in a 106-line traceback mid-sweep
            "",
            ["resources.cpu=0.00001"],
            r"resources.cpu: 1e-05 is finer than the 0.0001 steps Ray reserves in; give a "
            r"multiple of 0.0001, e.g. 0.0001",
        ),
        ("", ["resources.gpu=0.33333"], r"resources.gpu: 0.33333 .*, e.g. 0.3333"),
        ("", ["adapters.asha_reduction=.inf", "adapters.scheduler=asha"], "finite number"),
        ("", ["fusion.targets.a=[]"], "fusion.targets.a: fuses no adapter"),
        ("", ["fusion.targets.a=5"], "fusion.targets.a: use 'all' or a list"),
        (  # it read "unknown task(s) ['b']; known: ['a']" of a task declared under tasks
            "",
            ["adapters.tasks=[a]", "fusion.targets.a=[a, b]"],
            r"fusion.targets.a: b: declared under tasks, but not in adapters.tasks \(a\), so the "
            "sweep trains no adapter to fuse; add it to adapters.tasks, or leave it out here",
        ),
        ("", ["name=" + "x" * 65], "name: 65 characters is too long"),
        ("", ["registry_prefix=team/glue"], "registry_prefix: 'team/glue' must be"),
        ("", ["adapters.seeds=[4294967296]"], "adapters.seeds: expected an integer <= 4294967295"),
        ("", ["adapters.training.seed=4294967296"], "seed must be an integer <= 4294967295"),
        ("", ["adapters.training.weight_decay=.inf"], "weight_decay must be a finite number"),
        ("", ["storage=[a, b]"], "storage: expected a folder path"),
        ("", ["tracking_uri=5"], "tracking_uri: expected a URI"),
        ("", ["max_length=[128"], r"override 'max_length=\[128': the value is not valid YAML"),
    ],
)
def test_bad_values_give_one_line_naming_the_field(tmp_path, extra, overrides, message):
    path = _write(tmp_path, BASE + extra)
    with pytest.raises(ConfigError, match=message) as error:
        load_config(path, overrides)
    assert "\n" not in str(error.value)


def test_a_budget_merges_its_changes_and_the_command_line_still_wins(tmp_path):
    budgets = (
        "adapters: {training: {max_epochs: 9, warmup_ratio: 0.1}}\n"
        "budgets:\n"
        "  small: {name: p-small, adapters: {training: {max_epochs: 2}, reduction_factors: [8]}}\n"
        "  big: {}\n"
    )
    path = _write(tmp_path, BASE + budgets)
    plain = load_config(path)
    assert (plain.name, plain.budget, plain.budget_changes) == ("p", None, {})
    small = load_config(path, ["budget=small"])
    assert small.name == "p-small" and small.budget == "small"
    assert small.adapters.training.max_epochs == 2  # the budget's
    assert small.adapters.training.warmup_ratio == 0.1  # kept: mappings merge key by key
    assert small.adapters.reduction_factors == (8,)
    assert small.budget_changes == {
        "name": "p-small",
        "adapters.training.max_epochs": 2,
        "adapters.reduction_factors": [8],
    }
    wins = load_config(path, ["budget=small", "adapters.training.max_epochs=4"])
    assert wins.adapters.training.max_epochs == 4
    assert load_config(path, ["budget=big"]).name == "p"


@pytest.mark.parametrize(
    ("budgets", "message"),
    [
        (
            "{quick: {adapters: {trainin: {max_epochs: 1}}}}",
            "budgets.quick.adapters: unknown key(s) ['trainin'] (did you mean 'training'?); "
            "allowed: architecture, ",
        ),
        (
            "{quick2: {adapter: {training: {max_epochs: 1}}}}",
            "budgets.quick2: unknown key(s) ['adapter'] (did you mean 'adapters'?); "
            "allowed: name, ",
        ),
        (
            "{cpu: {fusion: {training: {max_epoch: 1}}}}",
            "budgets.cpu.fusion.training: unknown key(s) ['max_epoch'] "
            "(did you mean 'max_epochs'?)",
        ),
        (
            "{cpu: {adapters: {task_training: {a: {patients: 1}}}}}",
            "budgets.cpu.adapters.task_training.a: unknown key(s) ['patients']",
        ),
        (
            "{cpu: {tasks: {a: {max_train_example: 9, dev: {pth: t.tsv}}}}}",
            "budgets.cpu.tasks.a: unknown key(s) ['max_train_example'] (did you mean",
        ),
        ("{cpu: {tasks: {a: {dev: {pth: t.tsv}}}}}", "budgets.cpu.tasks.a.dev: unknown key(s)"),
        ("{cpu: {resources: {gpus: 1}}}", "budgets.cpu.resources: unknown key(s) ['gpus']"),
        ("{cpu: {budgets: {}}}", "budgets.cpu: a budget cannot set budget or budgets"),
        ("{cpu: 3}", "budgets.cpu: expected a mapping, got int 3"),
    ],
)
def test_every_budget_is_checked_when_the_config_loads_used_or_not(tmp_path, budgets, message):
    """A typo in a budget was found only when that budget was used, and said at the top level
    (`adapters: unknown key(s) ...`, `config: unknown key(s) ['adapter']`): it is refused at
    load, used or not, naming where it was written."""
    path = _write(tmp_path, BASE + f"budgets: {budgets}\n")
    name = budgets[1 : budgets.index(":")]
    for overrides in ([], [f"budget={name}"]):
        with pytest.raises(ConfigError) as caught:
            load_config(path, overrides)
        assert str(caught.value).startswith(message)


def test_a_budgets_keys_are_checked_by_name_only(tmp_path):
    """Every budget's keys are checked at load; a value only when its budget is used (the
    tasks' files are not read for each budget); a budget may give a split a hub's or a file's
    keys."""
    budgets = (
        "budgets:\n"
        "  odd: {adapters: {reduction_factors: [0]}, tasks: {a: {train: {path: nowhere.tsv}}}}\n"
        "  hub: {tasks: {a: {dev: {split: validation}}}}\n"
    )
    typo = "  typo: {adapters: {trainin: {}}}\n"
    with pytest.raises(ConfigError, match=r"^budgets.typo.adapters: unknown key"):
        load_config(_write(tmp_path, BASE + budgets + typo), ["budget=odd"])
    path = _write(tmp_path, BASE + budgets)
    assert load_config(path).name == "p"
    with pytest.raises(ConfigError, match="^adapters.reduction_factors"):
        load_config(path, ["budget=odd"])


def test_a_wrong_value_from_the_budget_in_use_names_the_budget(tmp_path):
    """A wrong value a budget set was named at the top level only (`adapters.training.max_epochs
    must be ...`), where the file has no such line: the message says which budget set it,
    unless the command line set the key last."""
    budgets = (
        "budgets:\n"
        "  quick: {adapters: {training: {max_epochs: 0}}, tasks: {a: {max_train_examples: -2}}}\n"
        "  fine: {adapters: {training: {max_epochs: 1}}}\n"
    )
    path = _write(tmp_path, BASE + budgets)
    note = "(from budgets.quick, the budget in use)"
    with pytest.raises(ConfigError, match=r"^task .a., max_train_examples.*-2") as caught:
        load_config(path, ["budget=quick"])
    assert str(caught.value).endswith(note)
    fixed_task = ["budget=quick", "tasks.a.max_train_examples=4"]
    with pytest.raises(ConfigError, match=r"^adapters.training.max_epochs.*got 0") as caught:
        load_config(path, fixed_task)
    assert str(caught.value).endswith(note)
    with pytest.raises(ConfigError) as caught:  # the command line set it last
        load_config(path, [*fixed_task, "adapters.training.max_epochs=-1"])
    assert "budgets" not in str(caught.value) and "got -1" in str(caught.value)
    with pytest.raises(ConfigError) as caught:  # a key of the command line's own
        load_config(path, [*fixed_task, "adapters.training.max_epochs=1", "adapters.bogus=1"])
    assert str(caught.value).startswith("adapters: unknown key(s) ['bogus']")
    assert "budgets" not in str(caught.value)  # it said "(from budgets.quick, ...)"
    with pytest.raises(ConfigError) as caught:  # a value the budget did not set
        load_config(path, ["budget=fine", "adapters.learning_rates=[-1]"])
    assert "budgets" not in str(caught.value)


def test_baselines_default_to_the_fusion_targets_and_every_system(tmp_path):
    path = _write(tmp_path, BASE + "fusion: {targets: {b: all}, seeds: [3, 4]}\n")
    assert load_config(path).baselines.systems == ()  # no section: no baselines
    config = load_config(
        path, ["baselines.seeds=[0, 1]", "baselines.system_training.full.learning_rate=3e-5"]
    )
    stage = config.baselines
    assert stage.systems == ("head", "full", "st-a-houlsby", "mt-a", "fusion-mt-a")
    assert stage.tasks == ("b",) and stage.seeds == (0, 1) and stage.reduction_factor == 16
    assert stage.training_for("head").learning_rate == 1e-4
    assert stage.training_for("full").learning_rate == 3e-5
    assert stage.training_for("full").max_epochs == stage.training.max_epochs == 30
    assert config.fusion.fusion_seeds == (3, 4)
    assert load_config(path, ["fusion.seeds=null"]).fusion.fusion_seeds == (0,)


def test_search_and_scheduler_default_to_the_grid_and_fifo(tmp_path):
    config = load_config(_write(tmp_path, BASE))
    assert (config.adapters.search, config.adapters.scheduler) == ("grid", "fifo")
    tuned = load_config(
        tmp_path / "pipe.yaml",
        [
            "adapters.search=optuna",
            "adapters.num_samples=5",
            "adapters.learning_rate_range=[1e-4, 1e-2]",
            "adapters.scheduler=asha",
            "adapters.asha_grace_period=2",
            "adapters.asha_reduction=3",
        ],
    )
    stage = tuned.adapters
    assert (stage.search, stage.num_samples, stage.learning_rate_range) == (
        "optuna",
        5,
        (1e-4, 1e-2),
    )
    assert (stage.scheduler, stage.asha_grace_period, stage.asha_reduction) == ("asha", 2, 3.0)


def test_a_dotted_task_name_is_refused_when_the_config_loads(tmp_path):
    """`glue.rte` was accepted (and `tasks` listed it), then every training of it died in a
    traceback from torch: a '.' cannot name a module, nor a part of a registered model's name."""
    text = BASE.replace("  b: {", "  glue.rte: {")
    with pytest.raises(ConfigError) as refused:
        load_config(_write(tmp_path, text), ["tasks.glue.rte.max_train_examples=1"])
    assert str(refused.value) == (
        "tasks: the task name 'glue.rte' has a '.', which cannot name its adapter, head and "
        "registered models ('.' separates their parts); rename it, e.g. glue-rte"
    )


def test_a_config_with_a_byte_order_mark_loads(tmp_path):
    path = _write(tmp_path, BASE)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_config(path).name == "p"


def test_duplicate_task_names_are_refused_with_the_line(tmp_path):
    text = "name: p\ntasks:\n  rte: {train: a.tsv}\n  mrpc: {train: b.tsv}\n  rte: {train: c.tsv}\n"
    with pytest.raises(ConfigError, match="line 5, column 3: duplicate key 'rte'"):
        load_config(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("written", "read"), [("no", False), ("on", True), ("Off", False), ("~", None)]
)
def test_a_key_yaml_reads_as_a_boolean_or_null_is_refused_with_the_quote_fix(
    tmp_path, written, read
):
    """An unquoted `no:` task became a task named False; `on:` under a section an unknown True
    that broke the sorting of the unknown-key message (a traceback)."""
    text = f"name: p\ntasks:\n  {written}: {{train: a.tsv}}\n"
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    expected = f'line 3, column 3: key {written} reads as {read} in YAML: quote it ("{written}")'
    assert str(caught.value).endswith(expected)
    with pytest.raises(ConfigError, match=r"'adapters=\{on: 1\}': .*key on reads as True"):
        load_config(_write(tmp_path, BASE), ["adapters={on: 1}"])


def test_a_number_key_beside_names_is_an_unknown_key_not_a_traceback(tmp_path):
    for override in ("adapters={1: 2, foo: 3}", "adapters.training={1: 2, foo: 3}"):
        with pytest.raises(ConfigError, match=r"unknown (key|field)\(s\) \[1, 'foo'\]"):
            load_config(_write(tmp_path, BASE), [override])


@pytest.mark.parametrize(
    ("override", "place", "meant"),
    [
        ("adapter.training={}", "config: unknown key(s) ['adapter']", "adapters"),
        ("adapters.trainin={}", "adapters: unknown key(s) ['trainin']", "training"),
        ("adapters.training.max_epoch=1", "adapters.training: unknown key(s)", "max_epochs"),
        (
            "adapters.task_training.b.patients=1",
            "adapters.task_training.b: unknown key(s) ['patients']",
            "patience",
        ),
        ("fusion.target={}", "fusion: unknown key(s) ['target']", "targets"),
        ("baselines.system=[head]", "baselines: unknown key(s) ['system']", "systems"),
        ("resources.gpus=1", "resources: unknown key(s) ['gpus']", "gpu"),
        ("base_model_layout.layer=x", "base_model_layout: unknown key(s)", "layers"),
        ("tasks.a.text_field=[x]", "task 'a', text_field: unknown key", "text_fields"),
        ("tasks.a.dev={pth: t.tsv}", "task 'a', dev.pth: unknown dev key", "path"),
    ],
)
def test_an_unknown_key_says_the_close_one_and_lists_the_allowed_keys_one_way(
    tmp_path, override, place, meant
):
    """Every unknown key: where it was written, `(did you mean ...?)` when one is close, and
    the allowed keys as `allowed: a, b` (the training mappings listed them as a Python list)."""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, BASE), [override])
    message = str(caught.value)
    assert message.startswith(place)
    head, _, allowed = message.partition(f" (did you mean {meant!r}?); allowed: ")
    assert allowed and meant in allowed.split(", ")
    assert not any(mark in allowed for mark in "[]'")


def test_the_training_keys_shown_are_the_ones_a_config_may_set(tmp_path):
    """`progress` (whether the fit loop draws a bar, which the commands set from the terminal)
    was listed beside the settings and taken from a config: it is not a config key."""
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, BASE), ["adapters.training.max_epoch=1"])
    assert "progress" not in str(caught.value)
    assert "cuda_graphs" in str(caught.value)
    with pytest.raises(ConfigError, match=r"^fusion.training: unknown key\(s\) \['progress'\]"):
        load_config(_write(tmp_path, BASE), ["fusion.training.progress=true"])
    with pytest.raises(ConfigError, match="unknown key"):  # nothing close: no guess
        load_config(_write(tmp_path, BASE), ["adapters.training.zzz=1"])
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, BASE), ["adapters.training.zzz=1"])
    assert "did you mean" not in str(caught.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("base_model=''", "base_model: expected a non-empty string, got ''"),  # was minilm-l6
        ("demo_tasks=yes2", "demo_tasks: expected true or false, got 'yes2'"),  # was the demo
        ("demo_tasks='false'", "demo_tasks: expected true or false, got 'false'"),
    ],
)
def test_values_that_silently_meant_something_else_are_refused(tmp_path, override, message):
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, BASE), [override])
    assert str(caught.value) == message


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, "name: p\ntasks: [unclosed\n")
    with pytest.raises(ConfigError, match="line 3"):
        load_config(path)


def test_a_tab_in_the_indentation_says_to_indent_with_spaces(tmp_path):
    path = _write(tmp_path, BASE.replace("  b: {", "\tb: {"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: YAML syntax error at line 5, column 1: found character '\\t' that cannot "
        "start any token; indent with spaces, not tabs"
    )


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_KEYS = [
    "name",
    "base_model",
    "max_length",
    "adapters.reduction_factors",
    "adapters.learning_rates",
    "adapters.training.max_epochs",
    "adapters.training.patience",
    "adapters.training.learning_rate",
    "fusion.targets",
    "fusion.preset",
    "resources.cpu",
    "resources.gpu",
    "adapters.tasks",
    "unknown_key",
    "adapters.training.metric",
    "adapters.search",
    "adapters.scheduler",
    "adapters.num_samples",
    "adapters.asha_grace_period",
]
_VALUES = st.one_of(
    st.integers(-5, 300),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.lists(st.integers(-2, 70), max_size=3),
    st.booleans(),
    st.none(),
    st.sampled_from(["all", "[a]", "{a: all}", "1e-3", "dynamic", "optuna", "asha"]),
)


@settings(max_examples=60, deadline=None)
@given(overrides=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), max_size=3))
def test_any_override_either_loads_or_fails_with_a_config_error(tmp_path_factory, overrides):
    path = _write(tmp_path_factory.mktemp("cfg"), BASE)
    items = [f"{key}={value}" for key, value in overrides]
    try:
        config = load_config(path, items)
    except ConfigError as error:
        assert "\n" not in str(error)
    else:
        assert config.name and config.tasks


def test_cli_options_override_a_tasks_own_training_settings(tmp_path):
    from adapterfleet.orchestration.local import adapter_training

    config = load_config(
        _write(tmp_path, BASE + "adapters: {task_training: {b: {max_epochs: 7}}}\n")
    )
    assert adapter_training(config, "b").max_epochs == 7
    changed = adapter_training(config, "b", max_epochs=None, learning_rate=0.5)
    assert (changed.max_epochs, changed.learning_rate) == (7, 0.5)
    assert adapter_training(config, "a", max_epochs=2).max_epochs == 2


def test_storage_is_made_absolute_and_the_default_store_lies_under_it(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # a relative storage is relative to the cwd, not the YAML's folder
    config = load_config(_write(tmp_path, BASE + "storage: runs\n"))
    assert config.storage == work.resolve() / "runs" and config.storage.is_absolute()
    assert config.tracking_uri == f"sqlite:///{work.resolve() / 'runs' / 'mlflow.db'}"
    assert config.source["storage"] == "runs" and "tracking_uri" not in config.source
    plain = load_config(_write(tmp_path, BASE))
    assert plain.storage == work.resolve() / "adapterfleet-runs"
    assert plain.tracking_uri == f"sqlite:///{plain.storage / 'mlflow.db'}"


def test_a_copy_given_another_storage_takes_its_embedded_store_along(tmp_path, monkeypatch):
    """A notebook's `dataclasses.replace(config, storage=...)` kept writing runs into the old
    folder's mlflow.db while the checkpoints went to the new one; a URI the config or the
    environment gave stays as it was."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = load_config(_write(tmp_path, BASE + f"storage: {tmp_path / 'a'}\n"))
    moved = dataclasses.replace(config, storage=tmp_path / "b")
    assert moved.tracking_uri == f"sqlite:///{tmp_path.resolve() / 'b' / 'mlflow.db'}"
    assert dataclasses.replace(moved, name="other").tracking_uri == moved.tracking_uri
    own = f"sqlite:///{tmp_path.resolve() / 'a' / 'mlflow.db'}"  # in the config: kept
    given = load_config(
        _write(tmp_path, BASE + f"storage: {tmp_path / 'a'}\ntracking_uri: {own}\n")
    )
    assert dataclasses.replace(given, storage=tmp_path / "c").tracking_uri == own
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    served = load_config(_write(tmp_path, BASE + f"storage: {tmp_path / 'a'}\n"))
    assert dataclasses.replace(served, storage=tmp_path / "d").tracking_uri == (
        "http://mlflow.example:5000"
    )


def test_the_tracking_uri_comes_from_the_environment_when_the_config_names_none(
    tmp_path, monkeypatch
):
    path = _write(tmp_path, BASE + f"storage: {tmp_path / 'runs'}\n")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    config = load_config(path)
    assert config.tracking_uri == "http://mlflow.example:5000"
    assert config.source.get("tracking_uri") is None  # the document stays as written
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://elsewhere:5000")
    assert config.tracking_uri == "http://mlflow.example:5000"  # resolved once, at load time
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert load_config(path).tracking_uri == f"sqlite:///{tmp_path.resolve() / 'runs/mlflow.db'}"


def test_the_configs_own_tracking_uri_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    path = _write(tmp_path, BASE + "tracking_uri: http://own:5000\n")
    assert load_config(path).tracking_uri == "http://own:5000"
    changed = load_config(path, ["tracking_uri=sqlite:///elsewhere.db"])
    assert changed.tracking_uri == "sqlite:///elsewhere.db"
    assert changed.source["tracking_uri"] == "sqlite:///elsewhere.db"


def test_yaml_merge_keys_are_read_as_yaml_reads_them(tmp_path):
    """`<<: *base` merges a mapping; keys written beside it override the merged ones."""
    text = BASE.replace(
        "  a: {train",
        "  a: &a {train",
    ).replace(
        '  b: {train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}',
        "  b:\n    <<: *a\n    max_train_examples: 1",
    )
    config = load_config(_write(tmp_path, text))
    assert config.tasks["b"].text_fields == config.tasks["a"].text_fields == ("sentence",)
    assert (config.tasks["a"].max_train_examples, config.tasks["b"].max_train_examples) == (None, 1)


def test_set_changes_the_tasks_of_a_tasks_file_and_of_the_demo(tmp_path):
    """`--set tasks.<task>.<key>=...` reaches tasks that a tasks_file or demo_tasks declares,
    and a task name they lack is refused by name, as for inline tasks."""
    _write(tmp_path, "")
    tasks = BASE.split("tasks:\n", 1)[1]
    (tmp_path / "tasks.yaml").write_text("data_root: .\ntasks:\n" + tasks)
    path = tmp_path / "from-file.yaml"
    path.write_text("name: p\ntasks_file: tasks.yaml\n")
    config = load_config(path, ["tasks.a.max_train_examples=1"])
    assert (config.tasks["a"].max_train_examples, config.tasks["b"].max_train_examples) == (1, None)
    demo = ROOT / "configs" / "demo.yaml"
    storage = f"storage={tmp_path / 'runs'}"
    changed = load_config(demo, [storage, "tasks.demo_sentiment.max_train_examples=200"])
    assert changed.tasks["demo_sentiment"].max_train_examples == 200
    both = ["tasks.demo_sentiment.max_train_examples=200", "tasks.demo_aspect.max_train_examples=9"]
    changed = load_config(demo, [storage, *both])  # the second was "no task 'demo_aspect'"
    sizes = [changed.tasks[t].max_train_examples for t in ("demo_sentiment", "demo_aspect")]
    assert sizes == [200, 9]
    both = ["tasks.a.max_train_examples=1", "tasks.b.max_train_examples=2"]
    changed = load_config(path, both)
    assert (changed.tasks["a"].max_train_examples, changed.tasks["b"].max_train_examples) == (1, 2)
    for config_path, name in ((path, "aa"), (demo, "demo_sentimnt")):
        with pytest.raises(ConfigError, match=f"task '{name}', overrides: no such task"):
            load_config(config_path, [storage, f"tasks.{name}.max_train_examples=1"])
    with pytest.raises(ConfigError, match=r"no task 'aa' in tasks \(tasks: a, b\); check the name"):
        load_config(_write(tmp_path, BASE), ["tasks.aa.max_train_examples=1"])
    assert not (tmp_path / "runs").exists()


def test_the_demo_config_is_found_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here: a user who installed the package
    shipped = load_config("demo", ["budget=tiny"])
    assert (shipped.name, shipped.max_length) == ("demo", 64)
    assert set(shipped.tasks) == {"demo_sentiment", "demo_aspect", "demo_negation", "demo_delivery"}
    assert shipped == load_config(ROOT / "configs" / "demo.yaml", ["budget=tiny"])
    (tmp_path / "demo").write_text("name: mine\ndemo_tasks: true\n")  # a file of that name wins
    assert load_config("demo").name == "mine"
    with pytest.raises(ConfigError, match=r"dmeo not found; .*ships with adapterfleet: demo\)$"):
        load_config("dmeo")


def test_a_training_learning_rate_or_seed_is_the_sweeps_list_where_that_is_left_out(tmp_path):
    """A trial takes its learning rate and seed from the sweep's lists: a value under
    `adapters.training` (or a task's `task_training`) was accepted and never used, and the
    sweep trained at 1e-4. It now is the list where the list is left out."""
    path = _write(tmp_path, BASE)
    given = [
        "adapters.training.learning_rate=0.01",
        "adapters.training.seed=5",
        "adapters.task_training.b.learning_rate=3e-3",
    ]
    stage = load_config(path, given).adapters
    assert (stage.learning_rates, stage.seeds) == ((0.01,), (5,))
    assert stage.grid_for("a").learning_rates == (0.01,)
    assert stage.grid_for("b").learning_rates == (3e-3,)  # the task's own rate, alone
    listed = load_config(
        path, [*given, "adapters.learning_rates=[0.01, 0.1]", "adapters.seeds=[5]"]
    )
    assert listed.adapters.grid_for("a").learning_rates == (0.01, 0.1)
    assert listed.adapters.grid_for("b").learning_rates == (3e-3,)  # no task_grid: its own
    within = ["adapters.task_grid.b.learning_rates=[1e-3, 3e-3]"]
    assert load_config(path, [*given, *within]).adapters.grid_for("b").learning_rates == (
        1e-3,
        3e-3,
    )
    assert load_config(path).adapters.learning_rates == (1e-4,)  # neither given: the default


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["adapters.learning_rates=[1e-4]", "adapters.training.learning_rate=0.01"],
            r"adapters\.training\.learning_rate: 0\.01 is not one of adapters\.learning_rates "
            r"\[0\.0001\], the values the sweep's trials take; list it there, set it to one of "
            r"them \(-o adapters\.training\.learning_rate=0\.0001\), or remove "
            r"adapters\.training\.learning_rate$",
        ),
        (
            ["adapters.seeds=[0, 1]", "adapters.training.seed=5"],
            r"adapters\.training\.seed: 5 is not one of adapters\.seeds \[0, 1\]",
        ),
        (
            ["adapters.task_training.a.seed=3"],
            r"adapters\.task_training\.a\.seed: 3 is not one of adapters\.seeds \[0\]",
        ),
        (
            [
                "adapters.task_grid.a.learning_rates=[1e-3]",
                "adapters.task_training.a.learning_rate=1",
            ],
            r"adapters\.task_training\.a\.learning_rate: 1 is not one of "
            r"adapters\.task_grid\.a\.learning_rates \[0\.001\]",
        ),
        (
            [
                "adapters.search=optuna",
                "adapters.learning_rate_range=[1e-4, 1e-2]",
                "adapters.training.learning_rate=0.5",
            ],
            r"adapters\.training\.learning_rate: 0\.5 is outside adapters\.learning_rate_range "
            r"\[0\.0001, 0\.01\], from which the sweep draws",
        ),
    ],
)
def test_a_training_value_the_sweep_would_not_take_is_refused(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, BASE), overrides)
