"""The repository's files that tests read: its root, the bundled demo and the demo's truth."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo.snapshot.json.gz"
DEMO_TRUTH = ROOT / "fixtures" / "demo.truth.json"
