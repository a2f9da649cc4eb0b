from __future__ import annotations

from gpuaudit.cli import main

main()
