"""What the guards against hostile engines and weights cost on the hot path, and the recorded
sizes their bounds are set from (`python -m experiments.guards`).

- the mask lookup of every sampled row (`PolicyVersions._sample`): alone, and the whole sample
  it is part of, at 1, 16 and 256 rows of a Leduc-sized batch;
- doudizhu's check that each listed move is playable on the trace (`DoudizhuAdapter.parse`):
  alone at 6 (random play's mean), 50 and 380 moves (a 20-card hand leading), and the whole
  parse of random-play states;
- the recording budget's bookkeeping per recorded step (`step_nbytes`, `refuses`);
- the bytes a learned seat's episode holds over random-play hands of each built-in game
  (what `--record-max-episode-mb` and `--record-max-total-mb` are set from).

Timings are the best of several repeats (`timeit`), in-process, one thread: a busy machine
adds noise above them, never below.
"""

from __future__ import annotations

import json
import os
import random
import timeit
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer


def _best_us(fn: Any, number: int, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def mask_check() -> dict[str, Any]:
    import torch

    from croupier.games.leduc import LeducAdapter
    from croupier.policies.learned import PolicyVersions

    torch.set_num_threads(1)
    versions = PolicyVersions(LeducAdapter(), seed=0)
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for rows in (1, 16, 256):
        mask = (rng.random((rows, 4)) < 0.6).astype(np.float32)
        mask[:, 0] = 1.0
        logits = np.where(mask > 0, rng.standard_normal((rows, 4)), -3.4e38).astype(np.float32)
        actions, index = np.zeros(rows, np.int64), np.arange(rows)
        n = 20_000 if rows < 256 else 5_000
        out[f"{rows} rows"] = {
            "lookup_us": round(_best_us(lambda: mask[index, actions].all(), n), 2),  # noqa: B023
            "sample_us": round(
                _best_us(lambda: versions._sample(logits, mask, True), n),  # noqa: B023
                2,
            ),
        }
    return out


def _doudizhu_states(hands: int, seed: int = 0) -> list[dict[str, Any]]:
    from croupier.engine.rlcard_games import RLCardTable

    table, rng, states = RLCardTable("doudizhu"), random.Random(seed), []
    for hand in range(hands):
        table.reset(seed + hand)
        while not table.is_over():
            state = table.state_json(table.current_player())
            states.append(state)
            table.step(rng.choice(state["legal_actions"]))
    return states


def doudizhu_check(hands: int) -> dict[str, Any]:
    from croupier.games.doudizhu import (
        ACTION_CODES,
        ACTION_COUNTS,
        BEATS,
        SERVED_FEATURES,
        DoudizhuAdapter,
        _counts,
    )

    adapter = DoudizhuAdapter(SERVED_FEATURES)
    held = _counts("3334445556667778889T")  # leading with it: 380 legal moves
    leading = np.flatnonzero((held[None, :] >= ACTION_COUNTS).all(1))[1:]  # no pass
    out: dict[str, Any] = {}
    for k in (6, 50, 380):
        ids = leading[:k]
        out[f"check {k} moves us"] = round(
            _best_us(lambda: BEATS[0][ACTION_CODES[ids]].all(), 20_000),  # noqa: B023
            2,
        )
    states = _doudizhu_states(hands)

    def parse_all() -> None:
        for state in states:
            adapter.parse(state)

    out["parse per state us"] = round(_best_us(parse_all, 3) / len(states), 2)
    out["states"] = len(states)
    out["mean legal moves"] = round(float(np.mean([len(s["legal_actions"]) for s in states])), 1)
    return out


def record_bookkeeping() -> dict[str, Any]:
    from croupier.trajectories.recorder import RecordingBudget, SeatRecorder, step_nbytes

    obs, cands, logits = (np.zeros(399, np.float32), np.zeros((20, 161), np.float32),
                          np.zeros(20, np.float32))  # fmt: skip
    budget = RecordingBudget(16 << 20, 512 << 20)
    recorder = SeatRecorder("g", "0", "learned", budget=budget)

    def step() -> None:
        budget.refuses(recorder, step_nbytes(obs, cands, logits))

    return {"per step us": round(_best_us(step, 100_000), 3)}


def episode_bytes(game: str, hands: int, seed: int = 1) -> dict[str, Any]:
    """Bytes (`step_nbytes`, final observation left out) of each seat's episode, random play."""
    from croupier.engine.rlcard_games import RLCardTable
    from croupier.games.registry import load_adapter
    from croupier.trajectories.recorder import step_nbytes

    table, adapter, rng = RLCardTable(game), load_adapter(game), random.Random(seed)
    sizes, steps = [], []
    for hand in range(hands):
        table.reset(seed + hand)
        seat_bytes: dict[int, int] = {}
        seat_steps: dict[int, int] = {}
        while not table.is_over():
            seat = table.current_player()
            state = table.state_json(seat)
            obs, mask = adapter.encode(state)  # a candidate game's mask: its candidates
            logits = np.zeros(len(mask) if mask.ndim == 2 else mask.shape[0], np.float32)
            seat_bytes[seat] = seat_bytes.get(seat, 0) + step_nbytes(obs, mask, logits)
            seat_steps[seat] = seat_steps.get(seat, 0) + 1
            table.step(rng.choice(state["legal_actions"]))
        sizes += list(seat_bytes.values())
        steps += list(seat_steps.values())
    b = np.array(sizes)
    return {
        "episodes": len(b),
        "mean_bytes": int(b.mean()),
        "p99_bytes": int(np.percentile(b, 99)),
        "max_bytes": int(b.max()),
        "max_steps": int(max(steps)),
    }


def bench_guards(hands: int = 300, out: Path | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {
        "load_average_before": round(os.getloadavg()[0], 2),  # timings are only as quiet
        "mask_check": mask_check(),
        "doudizhu_legal_check": doudizhu_check(min(hands, 30)),
        "record_bookkeeping": record_bookkeeping(),
        "episode_bytes": {g: episode_bytes(g, hands) for g in ("leduc-holdem", "uno", "doudizhu")},
    }
    report["load_average_after"] = round(os.getloadavg()[0], 2)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "guards.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(
    hands: Annotated[int, typer.Option(help="Random-play hands per game for episode sizes")] = 300,
    out: Path = Path("bench/results"),
) -> None:
    """The hot-path cost of the guards against hostile engines and weights (mask lookup per
    sampled row, doudizhu's legal-move check, recording bookkeeping) and the recorded episode
    sizes the recording budgets are set from."""
    typer.echo(json.dumps(bench_guards(hands, out), indent=2))


if __name__ == "__main__":
    typer.run(main)
