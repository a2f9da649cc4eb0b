"""How the commands declare their options and read back the ones the user gave: `scan` and
`snapshot save` from the table in `gpuaudit.app.options` (`takes`), the other commands one by one
(`opt`), each with its `GPUAUDIT_...` variable; and the table of those variables README shows.

Only Typer is imported at the top, so that `gpuaudit --help` stays fast.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from gpuaudit.app.options import BY_NAME, Kind, Option
from gpuaudit.core import debuglog

F = TypeVar("F", bound=Callable[..., None])


_TYPES: dict[Kind, object] = {
    Kind.TEXT: str | None,
    Kind.SPAN: str | None,
    Kind.FLAG: bool,
    Kind.NUMBER: float,
    Kind.PATH: Path | None,
    Kind.LIST: list[str] | None,
    Kind.REPORTS: list[str] | None,
}


def takes(*options: Option, **types: type) -> Callable[[F], F]:
    """Declare `options` on a command, after its own parameters, each from its one entry in
    `gpuaudit.app.options` (`types` by name where the kind does not give the Python type). Typer
    reads a command's options from its signature, so they are written there; the command
    takes them as `**_` and reads the ones the user gave with `given`."""

    def declare(command: F) -> F:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        more = [_parameter(o, types.get(o.name)) for o in options]
        command.__signature__ = sig.replace(parameters=[*own, *more])  # type: ignore[attr-defined]
        return command

    return declare


def _parameter(o: Option, hint: type | None) -> inspect.Parameter:
    default = False if o.kind is Kind.FLAG else o.default
    metavar = o.metavar
    if hint is not None:
        default = hint(default)
        if issubclass(hint, Enum):
            metavar = "|".join(str(m.value) for m in hint)
    flags = (o.flag, o.short) if o.short else (o.flag,)
    info = typer.Option(
        *flags, envvar=o.envvar, rich_help_panel=o.panel, help=o.help, metavar=metavar
    )
    kind, annotation = inspect.Parameter.KEYWORD_ONLY, Annotated[hint or _TYPES[o.kind], info]
    return inspect.Parameter(o.name, kind, default=default, annotation=annotation)


def opt(
    flag: str, *short: str, table: Mapping[str, str], command: str, metavar: str, **kw: Any
) -> Any:
    """A `typer.Option` of `command` with its help from `table`, shown with `metavar` (empty
    for a flag), read from `GPUAUDIT_`, the command and the flag's name (`rules --pod-label`
    from `GPUAUDIT_RULES_POD_LABEL`) unless `envvar=` says otherwise: a variable exported for
    one command never changes what another does. `scan` and `snapshot save` take theirs from
    `gpuaudit.app.options` instead."""
    name = flag.removeprefix("--").upper().replace("-", "_")
    kw.setdefault("envvar", envvar(command, name))
    return typer.Option(flag, *short, help=table[flag], metavar=metavar, **kw)


def envvar(command: str, name: str) -> str:
    """`GPUAUDIT_<COMMAND>_<NAME>`, or `GPUAUDIT_<NAME>` for the root command (`""`)."""
    return "_".join(p for p in ("GPUAUDIT", command.upper(), name) if p)


def given(ctx: typer.Context) -> dict[str, object]:
    """The options the user set, by flag or environment variable, by name (a trailing `_` that
    avoids a Python name dropped, enums as their values). Defaults are left out so that
    `gpuaudit.toml` can fill them in."""
    out: dict[str, object] = {}
    for param in ctx.command.params:
        name = param.name
        if param.param_type_name != "option" or name is None:
            continue
        source = ctx.get_parameter_source(name)
        # By name: the enum's module differs between click and the click that Typer vendors.
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            value = ctx.params[name]
            known = BY_NAME.get(name.rstrip("_"))
            if source.name == "ENVIRONMENT" and known is not None and known.env_lines:
                # One value per line: the command line split the variable at every space.
                value = os.environ.get(known.envvar, "").splitlines()
            out[name.rstrip("_")] = value.value if isinstance(value, Enum) else value
    return out


def from_environment(ctx: typer.Context) -> frozenset[str]:
    """The names of the options `given` took from their `GPUAUDIT_...` variable, so that an
    error about one can name the variable the user set."""
    return frozenset(
        name.rstrip("_")
        for name in ctx.params
        if (source := ctx.get_parameter_source(name)) is not None and source.name == "ENVIRONMENT"
    )


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
