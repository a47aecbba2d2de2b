"""The benchmarks' figures: matplotlib without a display, each saved the same way."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (benchmarks run on machines with no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def legend(ax: Any, fontsize: float = 7, width: int = 70, loc: str = "best") -> None:
    """The axes' legend with each label wrapped at `width` characters: a label naming a
    setting and an adapter's import path ran wider than the figure, and laying it out pushed
    the plot into a corner."""
    handles, labels = ax.get_legend_handles_labels()
    wrapped = [textwrap.fill(label, width) for label in labels]
    ax.legend(handles, wrapped, fontsize=fontsize, loc=loc)


def save(fig: Any, path: Path) -> None:
    """Lay the figure out, write it as a PNG and free it (a long run draws many)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def save_report(
    report: dict[str, Any], path: Path, plot: Callable[[dict[str, Any], Path], None]
) -> dict[str, Any]:
    """A benchmark's result as `path` (JSON) and its figure beside it (`plot`, same name,
    .png); the report, with where it was saved (its folder made if missing: `--out DIR`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=float))
    plot(report, path.with_suffix(".png"))
    report["saved"] = str(path)
    return report
