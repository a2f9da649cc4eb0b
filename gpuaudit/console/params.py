"""How the commands declare their options and read back the ones the user gave: `scan` and
`snapshot save` each option from its entry in `gpuaudit.app.options` (`option`), the other
commands one by one (`opt`), every one a `typer.Option` in an `Annotated` parameter, each with
its `GPUAUDIT_...` variable; and the table of those variables README shows.

Only Typer is imported at the top, so that `gpuaudit --help` stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from gpuaudit.app.options import BY_NAME, Kind, Option
from gpuaudit.core import debuglog


def option(name: str) -> Any:
    """The `typer.Option` of the option `name` of `gpuaudit.app.options`, for an `Annotated`
    parameter of `scan` or `snapshot save`: its flags, help, help panel, variable and what
    `--help` shows for its value, all from its one entry in the table."""
    o = BY_NAME[name]
    flags = (o.flag, o.short) if o.short else (o.flag,)
    return typer.Option(
        *flags,
        envvar=o.envvar,
        rich_help_panel=o.panel,
        help=o.help,
        metavar=o.metavar,
        readable=name not in WRITTEN,
    )


WRITTEN = frozenset({"output", "per_owner"})
"""Path options gpuaudit writes, never reads: Click must not refuse them as "not readable"
(a file that exists but cannot be read can be replaced; one that cannot be written is said
so when it is written)."""


def opt(
    flag: str, *short: str, table: Mapping[str, str], command: str, metavar: str, **kw: Any
) -> Any:
    """A `typer.Option` of `command` with its help from `table`, shown with `metavar` (empty
    for a flag), read from `GPUAUDIT_`, the command and the flag's name (`rules --pod-label`
    from `GPUAUDIT_RULES_POD_LABEL`) unless `envvar=` says otherwise: a variable exported for
    one command never changes what another does. `scan` and `snapshot save` take theirs from
    `gpuaudit.app.options` instead (`option`)."""
    name = flag.removeprefix("--").upper().replace("-", "_")
    kw.setdefault("envvar", envvar(command, name))
    return typer.Option(flag, *short, help=table[flag], metavar=metavar, **kw)


def envvar(command: str, name: str) -> str:
    """`GPUAUDIT_<COMMAND>_<NAME>`, or `GPUAUDIT_<NAME>` for the root command (`""`)."""
    return "_".join(p for p in ("GPUAUDIT", command.upper(), name) if p)


def given(ctx: typer.Context) -> dict[str, object]:
    """The options the user set, by flag or environment variable, by name (enums as their
    values). Defaults are left out so that `gpuaudit.toml` can fill them in."""
    out: dict[str, object] = {}
    for param in ctx.command.params:
        name = param.name
        if param.param_type_name != "option" or name is None:
            continue
        source = _source(ctx, name)
        if source in ("COMMANDLINE", "ENVIRONMENT"):
            value = ctx.params[name]
            known = BY_NAME.get(name)
            if source == "ENVIRONMENT" and known is not None and known.env_lines:
                # One value per line: the command line split the variable at every space.
                value = os.environ.get(known.envvar, "").splitlines()
            out[name] = _typed(value, known)
    return out


def _typed(value: object, known: Option | None) -> object:
    """A value as the command's function receives it: a path as a `Path` (before Typer 0.29
    the context holds it as text, converted only on the way to the function), an enum as its
    value."""
    if isinstance(value, str) and known is not None and known.kind is Kind.PATH:
        return Path(value)
    return value.value if isinstance(value, Enum) else value


def from_environment(ctx: typer.Context) -> frozenset[str]:
    """The names of the options `given` took from their `GPUAUDIT_...` variable, so that an
    error about one can name the variable the user set."""
    return frozenset(name for name in ctx.params if _source(ctx, name) == "ENVIRONMENT")


def _source(ctx: typer.Context, name: str) -> str | None:
    """Where the parameter's value came from (Click's `Context.get_parameter_source`), by the
    name of the `ParameterSource` member: Typer does not export the enum."""
    source = ctx.get_parameter_source(name)
    return None if source is None else source.name


def environment(app: typer.Typer) -> dict[str, list[tuple[str, str]]]:
    """Every environment variable the commands of `app` read: variable -> (command, flag)
    pairs, the root command as `gpuaudit`."""
    found: dict[str, list[tuple[str, str]]] = {}

    def walk(cmd: Any, path: str) -> None:
        for param in cmd.params:
            if param.param_type_name == "option" and isinstance(param.envvar, str):
                found.setdefault(param.envvar, []).append((path, param.opts[0]))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "gpuaudit")
    return found


def environment_table(app: typer.Typer) -> str:
    """README's table of environment variables, one row per command (generated, so that it
    cannot drift from the options)."""
    rows: dict[str, list[str]] = {}
    for var, uses in environment(app).items():
        for command in sorted({c for c, _ in uses}):
            rows.setdefault(command, []).append(var)
    lines = ["| command | environment variables (one per option, `GPUAUDIT_DEBUG` for all) |"]
    lines.append("|---|---|")
    for command, names in rows.items():
        shown = [n for n in names if n != debuglog.ENVVAR] or names
        lines.append(f"| `{command}` | {', '.join(f'`{n}`' for n in shown)} |")
    return "\n".join(lines) + "\n"
