"""The terminal side of the command line, apart from the commands themselves (`gpuaudit.cli`):
`style` (one-line errors, help without type placeholders, the summary fitted to the terminal),
`params` (options declared from `gpuaudit.app.options` and read back), `progress` (the transient
progress lines on stderr) and `reference` (what `checks` and `explain` print).

Importing this package loads only Typer and rich, so that `gpuaudit --help` stays fast; the
modules that load the checks or the reports (`progress`, `reference`) are imported by the
commands when they run.
"""
