"""A learning curve measured, not guessed: the version a server serves, snapshot every so
often while it trains, each scored afterwards by the strength score against the rules
(`bench/evaluate.py`, `arena/duplicate.py`); and how long that curve sat below the rules' own
record (`bench strength` reports it beside every curve).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any


class Snapshots:
    """The version a server serves, copied every `every_s` seconds of the run into `folder`
    (from the first version the server wrote, and once more at the end): the evaluation curve
    is scored from these after training, so evaluating costs the training nothing, and a
    version evicted from the server's weights dir meanwhile is still there."""

    def __init__(self, weights_dir: Path, folder: Path, every_s: float):
        self.weights_dir, self.folder, self.every_s = weights_dir, folder, every_s
        self.taken: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshots", daemon=True)

    def __enter__(self) -> Snapshots:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.take(time.monotonic() - self._t0)  # the version the run ended with

    def _run(self) -> None:
        due = 0.0
        while not self._stop.is_set():
            elapsed = time.monotonic() - self._t0
            if elapsed >= due:
                # until the server wrote its first version, try again every second
                taken = self.take(elapsed)
                due = time.monotonic() - self._t0 + (self.every_s if taken else 1.0)
            self._stop.wait(min(1.0, max(0.0, due - elapsed)))

    def take(self, elapsed: float) -> bool:
        try:
            meta = json.loads((self.weights_dir / "latest.json").read_text())
            version = int(meta["version"])
            if self.taken and self.taken[-1]["version"] == version:
                self.taken.append({**self.taken[-1], "seconds": elapsed})  # served all along
                return True
            source = self.weights_dir / meta["file"]
            target = self.folder / f"{len(self.taken):04d}-v{version}.weights"
            shutil.copyfile(source, target)
        except (OSError, ValueError, KeyError):  # no version written yet (or one replacing it)
            return False
        if not self.taken:
            # Minute 0 is the first version served (play starts there: a run waits for it),
            # not this thread's start: a trainer distilling the rules' clone first took
            # 10-75 s to serve it, which is no part of the curve.
            self._t0 += elapsed
            elapsed = 0.0
        self.taken.append({"seconds": elapsed, "version": version, "file": target.name,
                           "spec": meta["spec"]})  # fmt: skip
        return True


def score_snapshots(game: str, snapshots: list[dict[str, Any]], folder: Path, hands: int
                    ) -> list[dict[str, Any]]:  # fmt: skip
    """The evaluation curve: each snapshot's strength score against the rules (sampled), on
    the same deals for every point."""
    from croupier.bench.evaluate import payoff_vs
    from croupier.policies.module import ModelSpec
    from croupier.policies.weights_file import read_weights

    curve, scored = [], {}
    for snap in snapshots:
        if snap["file"] not in scored:  # a version served across several snapshots: once
            spec = ModelSpec.from_dict(snap["spec"])
            weights = read_weights(folder / snap["file"])
            scored[snap["file"]] = payoff_vs(game, spec, weights, hands, seed=2)
        curve.append({"seconds": snap["seconds"], "version": snap["version"],
                      **scored[snap["file"]]})  # fmt: skip
    return curve
