"""How the command line speaks: usage errors as gpuaudit's own one-line errors (exit code 2),
and help that shows `--demo` as a flag, not `--demo <bool>`.

Typer prints its usage errors as framed boxes over several lines, unlike every other error
gpuaudit prints, and since it vendors Click (0.29) it labels every option with its Python type
(`<bool>`, `<str>`, `{file}`). The command classes here replace the first and give the help
option a blank value; the commands give every other parameter an explicit `metavar`
(`gpuaudit.cli.options`). `tests/test_cli_style.py` holds both to it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

PREFIX = "gpuaudit: error: "


class Command(TyperCommand):
    """A command whose `--help` option is listed without a type, and whose arguments read
    `FILE` in the usage line and the help, not `{FILE}` and `FILE <path>`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.param_type_name == "argument":
                # Typer 0.29 adds the Python type after an argument's name in the help.
                param.display_type_rich = _no_type  # type: ignore[attr-defined]

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


def _no_type(ctx: Any) -> str:
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
            code = _report(exc)
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


def _report(exc: Exception) -> int:
    """Print a Click error as gpuaudit prints its own; return the exit code."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `gpuaudit` alone: the help, as asked
        exc.show()  # type: ignore[attr-defined]
        return 2
    message = usage_message(exc)
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    sys.stderr.write(PREFIX + message + "\n")
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) and code else 2


def usage_message(exc: Exception) -> str:
    """A Click error's message as one line in gpuaudit's voice: lower-case first word, no
    closing full stop, no line breaks."""
    fmt = getattr(exc, "format_message", None)
    text = str(fmt() if callable(fmt) else exc)
    text = " ".join(text.split()).rstrip(".")
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text or "invalid usage"
