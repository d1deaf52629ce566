"""What `--help` shows beside each option: the kind of value it takes, and nothing for a flag.

This Typer prints a type for every option, flags included: `--resume <bool>`, `--help <bool>`,
`--set <list[str]>`. A reader takes `<bool>` for a value to give, but `--resume=true` is refused
and `run --resume true` reads `true` as the config. `plain_flags` blanks the type of every flag
of the command tree, `--help` included; options that take a value keep theirs (`<int>`,
`<path>`, or the metavar they declare).
"""

from __future__ import annotations

from typing import Any

EXIT_STATUS = (
    "Exit status: 0 done; 1 the job ran and failed (trials failed, training diverged, a wait "
    "timed out: what finished is kept); 2 refused, nothing done (a mistake to fix, named in the "
    "error line); 130 or 143 interrupted (Ctrl-C, SIGTERM)."
)


def plain_flags(command: Any, parent: Any = None, name: str | None = None) -> Any:
    """`command` (Typer's click command or group), every flag of it and of its subcommands
    shown without a type, and `-h` beside `--help` (it was "No such option: -h"; the
    subcommands' contexts inherit it). The contexts are built as Typer builds them when it
    parses, so `--help` gets the names the app's settings give it."""
    if parent is None:
        command.context_settings.setdefault("help_option_names", ["-h", "--help"])
    context = command.context_class(
        command, info_name=name, parent=parent, **command.context_settings
    )
    for param in command.get_params(context):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub_name, sub in (getattr(command, "commands", None) or {}).items():
        plain_flags(sub, context, sub_name)
    return command
