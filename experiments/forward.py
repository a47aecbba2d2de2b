"""`python -m experiments.forward`: a candidate game's served forward, torch against ONNX
Runtime.

In one process, on real states of the game (seat by seat, random play) encoded by the served
adapter, for each batch size: the CPU per decision of `PolicyVersions.act_rows` (assembly,
forward, sampling: what the batcher runs) with the forward in torch and in ONNX Runtime
(`policies/onnx_scorer.py`), the two alternated repetition by repetition so that this box's
drift falls on both alike; and whether their logits agree (`logits_agree`, the exactness
decision). CPU is the process's (`time.process_time`), one torch thread. Writes
forward-<game>.json and .png.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from croupier.bench.plotting import pyplot, save

VARIANTS = ("torch", "onnxruntime")


def _states(game: str, n: int) -> list[dict[str, Any]]:
    from croupier.engine.rlcard_games import RLCardTable

    table, out = RLCardTable(game), []
    table.reset(11)
    rng = np.random.default_rng(11)
    while len(out) < n:
        if table.is_over():
            table.reset()
            continue
        state = table.state_json(table.current_player())
        legal = state["legal_actions"]
        if len(legal) > 1:  # forced moves never reach the model
            out.append(state)
        table.step(legal[rng.integers(len(legal))])
    return out


def bench_forward(
    game: str, batches: list[int], reps: int, out_dir: Path, states: int = 512
) -> dict[str, Any]:
    import torch

    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions
    from croupier.policies.module import logits_agree

    torch.set_num_threads(1)
    adapter = load_adapter(game)
    if not getattr(adapter, "candidates", False):
        raise ValueError(f"{game} is not a candidate game: its forward has no ONNX scorer")
    served = {v: PolicyVersions(adapter, seed=0, onnx_forward=v == "onnxruntime") for v in VARIANTS}
    modules = {v: served[v].resolve(None)[1] for v in VARIANTS}
    if served["onnxruntime"]._scorer(modules["onnxruntime"]) is None:
        raise RuntimeError("ONNX Runtime does not serve here (not installed, or it disagreed)")
    encoded = [adapter.encode(s) for s in _states(game, states)]
    rows = []
    for b in batches:
        chunks = [encoded[i : i + b] for i in range(0, len(encoded) - b + 1, b)]
        per_rep: dict[str, list[float]] = {v: [] for v in VARIANTS}
        agree = True
        for rep in range(reps):
            for v in VARIANTS if rep % 2 == 0 else VARIANTS[::-1]:
                t0 = time.process_time()
                for chunk in chunks:
                    served[v].act_rows(modules[v], [e[0] for e in chunk], [e[1] for e in chunk])
                per_rep[v].append((time.process_time() - t0) / (len(chunks) * b) * 1e6)
        for chunk in chunks[:8]:
            obs, cands = [e[0] for e in chunk], [e[1] for e in chunk]
            got = [served[v].act_rows(modules[v], obs, cands, explore=False) for v in VARIANTS]
            agree &= all(
                logits_agree(x, y) for x, y in zip(got[0].logits, got[1].logits, strict=True)
            )
        row = {
            "batch": b,
            "candidates_per_state": float(np.mean([len(e[1]) for e in encoded])),
            **{f"{v}_us_per_decision": statistics.median(per_rep[v]) for v in VARIANTS},
            "ratio_onnx_to_torch": statistics.median(
                o / t for o, t in zip(per_rep["onnxruntime"], per_rep["torch"], strict=True)
            ),
            "logits_agree": agree,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"game": game, "reps": reps, "states": len(encoded), "results": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"forward-{game}.json").write_text(json.dumps(report, indent=2))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for v in VARIANTS:
        ax.plot(batches, [r[f"{v}_us_per_decision"] for r in rows], marker="o", label=v)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("decisions in one forward")
    ax.set_ylabel("CPU µs per decision (act_rows)")
    ax.set_title(f"{game}: the served forward, torch vs ONNX Runtime (1 thread)")
    ax.legend()
    save(fig, out_dir / f"forward-{game}.png")
    return report


def main(
    game: Annotated[str, typer.Option(help="A candidate game (doudizhu, uno)")] = "doudizhu",
    batches: Annotated[str, typer.Option(help="Decisions per forward, comma separated")] = (
        "1,2,4,8,16,64"
    ),
    reps: Annotated[int, typer.Option(help="Alternated repetitions; medians reported")] = 6,
    out: Path = Path("bench/results"),
) -> None:
    """A candidate game's served forward: CPU per decision in torch and in ONNX Runtime, and
    whether their logits agree."""
    bench_forward(game, [int(b) for b in batches.split(",")], reps, out)


if __name__ == "__main__":
    typer.run(main)
