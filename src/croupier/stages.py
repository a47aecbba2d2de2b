"""Server CPU per decision, by stage of the decide path (`croupier serve --profile-stages FILE`).

Off by default: each timed stage then costs one module-attribute test (~30 ns). On, each stage
reads the calling thread's CPU clock (`time.thread_time_ns`) at its start and end, so time the
thread spends preempted (this 2-core box is shared) does not count, and a stage run on the
forward thread is charged to the forward, not to the event loop that waits for it (a wall
clock would charge the forward thread for the loop's turns on the same pinned core). Measured
on this VM: 0.7-1.6 us a thread-clock read (a system call here; `perf_counter_ns` 0.23 us),
~20 reads a lone learned doudizhu decision (`add` returns its read, the next stage's start):
15-30 us, 3-5% of its cost, counted in the stages.

Each thread accumulates into a list of its own (no lock on the hot path, no count lost when the
forward thread and the event loop time stages at once); `snapshot` sums them.
`--profile-stages FILE` writes them to FILE on each SIGUSR1 (nanoseconds and calls per stage,
decisions timed); `croupier bench serve` asks at the start and the end of its measured window
and divides the difference (`bench/serve.py` `stage_costs`).

Stages, in the order a decision meets them:
    http_in             the fast lane's ASGI stack up to the route's handler: the route's
                        match, the Host allow-list, the body limit, the request metrics'
                        wrapper, the API key and content type checks, the request object
    parse               the request body: JSON bytes -> validated request (pydantic-core)
    encode              the adapter's whole encode or check (everything below it included)
      validate            a doudizhu state's checks (`DoudizhuAdapter.parse`)
      state_features      its state vector
      candidate_features  its legal moves' rows
    rules               the rules policy's move (a rules seat, or the fallback)
    batch_assembly      a forward's rows gathered into arrays
    forward             the network
    sampling            softmax, the sample, the validity checks, the answers per row
    record              a learned step appended to its seat's episode
    response            the answer: dict and JSON bytes
    http_out            the answer sent: Starlette's response, the metrics' wrapper, uvicorn's
                        send (headers, the socket write)
The sub-stages of `encode` are inside it (not added to the total); what no stage covers
(uvicorn's HTTP protocol and parser callbacks, the event loop and its system calls, the
batcher's queue, futures and thread hand-off) is the process's CPU less the top-level stages.
Both `http_*` stages are synchronous stretches of one request's coroutine (nothing in them
awaits anything that suspends), so the thread clock charges them to that request alone.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

STAGES = ("http_in", "parse", "encode", "validate", "state_features", "candidate_features",
          "rules", "batch_assembly", "forward", "sampling", "record", "response",
          "http_out")  # fmt: skip
# Inside `encode`: reported, not added to the total.
SUB_STAGES = frozenset({"validate", "state_features", "candidate_features"})
(HTTP_IN, PARSE, ENCODE, VALIDATE, STATE_FEATURES, CANDIDATE_FEATURES, RULES, BATCH_ASSEMBLY,
 FORWARD, SAMPLING, RECORD, RESPONSE, HTTP_OUT) = range(len(STAGES))  # fmt: skip
_DECISIONS = 2 * len(STAGES)  # each thread's list: ns per stage, calls per stage, decisions

ON = False  # read at every call site: `t0 = stages.clock() if stages.ON else 0`
clock = time.thread_time_ns

_local = threading.local()
_threads: list[list[int]] = []
_register = threading.Lock()  # taken once per thread, at its first stage


def _mine() -> list[int]:
    try:
        return _local.acc
    except AttributeError:
        acc = _local.acc = [0] * (_DECISIONS + 1)
        with _register:
            _threads.append(acc)
        return acc


def add(stage: int, t0: int) -> int:
    """Charge the CPU this thread used since `t0` (`clock()`) to `stage`; returns the clock
    it read, the next stage's start (`t1 = add(A, t0); add(B, t1)`): one read a stage, not
    two (each is a system call here, 1.6 us)."""
    acc = _mine()
    now = clock()
    acc[stage] += now - t0
    acc[len(STAGES) + stage] += 1
    return now


def decisions(n: int = 1) -> None:
    """Count `n` decisions (the requests' items, whatever seat answered them)."""
    _mine()[_DECISIONS] += n


def snapshot() -> dict[str, Any]:
    """{"decisions": n, "ns": {stage: ns}, "calls": {stage: calls}}, all threads summed."""
    with _register:
        accs = [list(a) for a in _threads]
    total = [sum(col) for col in zip(*accs, strict=True)] if accs else [0] * (_DECISIONS + 1)
    return {
        "decisions": total[_DECISIONS],
        "ns": dict(zip(STAGES, total[: len(STAGES)], strict=True)),
        "calls": dict(zip(STAGES, total[len(STAGES) : _DECISIONS], strict=True)),
    }


def reset() -> None:
    with _register:
        for acc in _threads:
            acc[:] = [0] * len(acc)


def enable(path: Path | None = None) -> None:
    """Time the stages from now on; with `path`, write `snapshot()` there as JSON on each
    SIGUSR1 (with `seq`, how many it wrote: the reader waits for the one it asked for), so a
    benchmark takes the totals at the start and end of its measured window."""
    global ON
    ON = True
    if path is not None:
        written = itertools.count(1)

        def write(*_: Any) -> None:
            tmp = Path(f"{path}.tmp")
            tmp.write_text(json.dumps({**snapshot(), "seq": next(written)}))
            os.replace(tmp, path)

        signal.signal(signal.SIGUSR1, write)


def disable() -> None:
    """Stop timing (the totals stay until `reset`)."""
    global ON
    ON = False


def request_snapshot(pid: int, path: Path, seq: int, timeout_s: float = 30.0) -> dict[str, Any]:
    """Ask process `pid` (started with `--profile-stages path`) for its `seq`-th snapshot."""
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            got = json.loads(Path(path).read_text())
            if got.get("seq", 0) >= seq:
                return got
        time.sleep(0.02)
    raise TimeoutError(f"process {pid} wrote no stage snapshot {seq} to {path}")


def difference(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What was timed between two snapshots."""
    return {
        "decisions": after["decisions"] - before["decisions"],
        **{k: {s: after[k][s] - before[k][s] for s in STAGES} for k in ("ns", "calls")},
    }
