"""How the command line speaks: every error as one line on stderr (`fail`, `failing`; usage
errors too, exit code 2; an unexpected error as one line that asks for a report, `run`), help
that shows `--demo` as a flag, not `--demo <bool>`, and the summary line fitted to the terminal.

Typer prints its usage errors as framed boxes over several lines, unlike every other error
gpuaudit prints, and labels parameters with their Python type (`<bool>`, `<str>`, `{FILE}`).
The command classes here, given to Typer as its documented `cls`, replace the first by
overriding Click's public `Command.main`, and give the help option a blank value
(`get_help_option`) and arguments their plain name in the usage line
(`collect_usage_pieces`); the commands give every other parameter an explicit `metavar`
(`gpuaudit.console.params`). One nicety has no documented API: the help lists an argument
without its type (`_untyped`), in each of the Typer series `pyproject.toml` allows.
`tests/test_cli_style.py` holds all of it, and `--help` stays as it was recorded.
"""

from __future__ import annotations

import copy
import os
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from gpuaudit.core import debuglog
from gpuaudit.core.errors import GpuauditError

if TYPE_CHECKING:
    from gpuaudit.app.pipeline import Outcome

PREFIX = "gpuaudit: error: "


class Command(TyperCommand):
    """A command whose `--help` option is listed without a type, and whose arguments read
    `FILE` in the usage line and the help, not `{FILE}` and `FILE <path>`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.param_type_name == "argument":
                _untyped(param)

    def get_help_option(self, ctx: Any) -> Any:
        return _blank(super().get_help_option(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


def _untyped(argument: Any) -> None:
    """List `argument` in the help by its name alone (`FILE`), without its Python type after
    it (`FILE <path>`): its help says what it is. Typer has no setting for this, so here
    gpuaudit reaches past its documented API, once, for each series `pyproject.toml` allows:
    Typer 0.29 asks the argument for the type it shows (`display_type_rich`), 0.28 asks the
    argument's Click type (`get_metavar`, a copy's, as Click shares its types)."""
    if hasattr(argument, "display_type_rich"):
        argument.display_type_rich = _no_type
    else:
        shown = copy.copy(argument.type)
        shown.get_metavar = _no_metavar
        argument.type = shown


def _no_type(ctx: Any) -> str:
    return ""


def _no_metavar(param: Any, ctx: Any) -> str:
    return ""


class Group(TyperGroup):
    """The root command (and `snapshot`): usage errors become one line on stderr."""

    def get_help_option(self, ctx: Any) -> Any:
        return _blank(super().get_help_option(ctx))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(
                args=args,
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except typer.TyperException as exc:
            code = _report(exc, sys.argv[1:] if args is None else list(args))
        except typer.Abort:
            sys.stderr.write("gpuaudit: aborted\n")
            code = 1
        else:
            code = rv if isinstance(rv, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _blank(option: Any) -> Any:
    if option is not None:
        option.metavar = ""
    return option


def _report(exc: Exception, args: Sequence[str] = ()) -> int:
    """Print a Click error as gpuaudit prints its own; return the exit code. `args` are the
    command line's, where a bad value is found to be shown."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `gpuaudit` alone: the help, as asked
        exc.show()  # type: ignore[attr-defined]
        return 2
    message = usage_message(exc, args)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    sys.stderr.write(PREFIX + _printable(message) + "\n")
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) and code else 2


def usage_message(exc: Exception, args: Sequence[str] = ()) -> str:
    """A Click error's message as one line in gpuaudit's voice: lower-case first word, no
    closing full stop, no line breaks; a bad value names its flag (or the variable it came
    from) and what it must be, without the wording of the libraries behind Typer (`Invalid
    value for ...`, pydantic's `Input should be ...` and `Value error, ...`)."""
    param, said = getattr(exc, "param", None), getattr(exc, "message", None)
    if type(exc).__name__ == "BadParameter" and param is not None and isinstance(said, str):
        return _bad_value(param, said, args)
    fmt = getattr(exc, "format_message", None)
    text = str(fmt() if callable(fmt) else exc)
    return _sentence(text) or "invalid usage"


def _sentence(text: str) -> str:
    text = " ".join(text.split()).rstrip(".")
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text


_MUST_BE = (
    ("valid number", "must be a number"),
    ("valid float", "must be a number"),
    ("valid integer", "must be a whole number"),
    ("valid boolean", "must be true or false"),
    ("valid bool", "must be true or false"),
)
"""What a value that cannot be converted must be, by the words pydantic (Typer 0.29) and Click
(Typer 0.28) use for the type."""


def _bad_value(param: Any, said: str, args: Sequence[str]) -> str:
    """`--timeout must be a number, got 'abc'`, or `GPUAUDIT_TIMEOUT (--timeout) ...` when the
    value came from the variable."""
    opts = [o for o in getattr(param, "opts", []) if isinstance(o, str)]
    flag = max(opts, key=len) if opts else str(getattr(param, "name", "") or "a value")
    who, value = flag, _given(opts, args)
    env = getattr(param, "envvar", None)
    if value is None and isinstance(env, str) and env in os.environ:
        who, value = f"{env} ({flag})", os.environ[env]
    text = _sentence(said).removeprefix("value error, ").removeprefix("Value error, ")
    must = next((m for words, m in _MUST_BE if words in text), None)
    if must is not None:
        got = f", got {value[:40]!r}" if value is not None else ""
        return f"{who} {must}{got}"
    if text.startswith("input should be "):
        return f"{who} must be {text.removeprefix('input should be ')}"
    return f"{who} {text}" if text.startswith("'") else f"{who}: {text}"


def _given(opts: Sequence[str], args: Sequence[str]) -> str | None:
    """The last value given on the command line to one of `opts` (`--flag VALUE`,
    `--flag=VALUE`), or None."""
    found = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in opts and i + 1 < len(args):
            found = args[i + 1]
        elif "=" in arg and arg.partition("=")[0] in opts:
            found = arg.partition("=")[2]
    return found


def _printable(text: str) -> str:
    """`text` with every character a terminal would act on shown escaped (`\\x1b`)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def fail(message: str, code: int = 2) -> NoReturn:
    """End the run with one error line on stderr."""
    from gpuaudit.report.text import terminal  # lazy: gpuaudit.report loads pandas

    Console(stderr=True, soft_wrap=True).print(Text(f"gpuaudit: error: {terminal(message, 600)}"))
    raise typer.Exit(code)


@contextmanager
def failing() -> Iterator[None]:
    """Turn an error a user can cause into one line on stderr and exit code 2."""
    try:
        yield
    except GpuauditError as exc:
        fail(str(exc))


def run(app: typer.Typer) -> None:
    """Run `app` as the console script: an unexpected error is one line, never a traceback
    (unless `--debug` asks for it)."""
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("gpuaudit: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        if debuglog.enabled():
            raise
        sys.stderr.write(
            f"gpuaudit: internal error: {type(exc).__name__}: {exc}. This is a bug; rerun with "
            f"--debug (or {debuglog.ENVVAR}=1) for the traceback, and report it.\n"
        )
        sys.exit(2)


def say_outcome(outcome: Outcome, *, quiet: bool, timings: bool) -> None:
    """Print what a scan's `outcome` tells on stderr: the timings (with `--timings`), the
    summary line (unless `quiet`), the warning that nothing was audited, why the gate fails
    (exit code 1 or 2), and each output that could not be written (all even when `quiet`)."""
    from gpuaudit.report.text import terminal  # lazy: gpuaudit.report loads pandas

    if timings:
        sys.stderr.write(outcome.timings_line() + "\n")
    if not quiet:
        if outcome.moved:
            sys.stderr.write(fit_terminal(outcome.moved) + "\n")
        sys.stderr.write(fit_terminal(outcome.summary_line()) + "\n")
    alarm = outcome.nothing_line()
    if alarm:  # even with --quiet: an empty audit must never pass for a healthy one
        sys.stderr.write(alarm + "\n")
    if outcome.exit_code == 2:
        sys.stderr.write(outcome.strict_line() + "\n")
    elif outcome.failing:
        sys.stderr.write(outcome.failing + "\n")
    for failure in outcome.failures:
        sys.stderr.write(PREFIX + terminal(failure, 600) + "\n")


def say_notes(notes: Sequence[str]) -> None:
    """Print each note of the configuration (what it set that does not apply) on stderr."""
    from gpuaudit.report.text import terminal  # lazy: gpuaudit.report loads pandas

    for note in notes:
        sys.stderr.write(f"gpuaudit: {terminal(note, 600)}\n")


def fit_terminal(line: str) -> str:
    """`line` wrapped at the terminal's width when stderr is a terminal (continuation lines
    indented by two), else as it is: a terminal shows no line wider than itself."""
    if not sys.stderr.isatty():
        return line
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return line
    if width < 20:
        return line
    # Broken between its clauses where it can, else between words.
    lines: list[str] = []
    for clause in line.split("; "):
        if lines and len(lines[-1]) + 2 + len(clause) <= width:
            lines[-1] += "; " + clause
            continue
        if lines:
            lines[-1] += ";"
        first = "  " if lines else ""
        lines += textwrap.wrap(
            clause,
            width - 1,  # room for the ";"
            initial_indent=first,
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
    return "\n".join(lines)
