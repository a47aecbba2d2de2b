"""The benchmarks' figures: matplotlib without a display, each saved the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (benchmarks run on machines with no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> None:
    """Lay the figure out, write it as a PNG and free it (a long run draws many)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
