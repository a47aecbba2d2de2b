"""The Ray Serve side of `croupier bench serve` (scenario `ray`): the module croupier serves,
served the way an RLlib user would first reach for, Ray Serve with `@serve.batch`.

Fair by construction: the same weights (`PolicyVersions(adapter, seed=0)`, croupier's own
version 0 — checked against the bench's copy by digest before measuring), the same request
body as croupier's decide (`{"seat", "state"}`), and the same work per request: encode the
state (`adapter.encode`), one masked forward for the batch and the same sampling
(`PolicyVersions.act`), the action's value back as JSON. Over HTTP, through Ray Serve's own
proxy. Ray Serve's settings are its batching guide's: an async batched method, a batch wait
short against the forward, `max_ongoing_requests` above `max_batch_size` (else batches never
fill), one replica per core given, each with one torch thread.

    python -m croupier.bench.ray_serve_app --port 8000 --replicas 1

prints `READY` once it answers (`GET /decide`: the weights' digest), then serves until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import hashlib
import signal
import sys
import threading
from typing import Any

GAME = "leduc-holdem"
MAX_BATCH = 64
BATCH_WAIT_S = 0.002
MAX_ONGOING = 2 * MAX_BATCH


def weights_digest(versions: Any) -> str:
    """A digest of the served weights (version 0), to check both sides serve the same."""
    h = hashlib.sha256()
    for name, array in sorted(versions.weights(0).items()):
        h.update(name.encode())
        h.update(array.tobytes())
    return h.hexdigest()[:16]


def build_app(replicas: int, max_batch: int, wait_s: float) -> Any:
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    @serve.deployment(
        num_replicas=replicas,
        max_ongoing_requests=max(MAX_ONGOING, 2 * max_batch),
        ray_actor_options={"num_cpus": 1},
    )
    class LearnedPolicy:
        def __init__(self) -> None:
            import numpy as np
            import torch

            from croupier.games.registry import load_adapter
            from croupier.policies.learned import PolicyVersions

            torch.set_num_threads(1)
            self.np = np
            self.adapter = load_adapter(GAME)
            self.versions = PolicyVersions(self.adapter, seed=0)
            self.version, self.module = self.versions.resolve(None)
            self.digest = weights_digest(self.versions)

        @serve.batch(max_batch_size=max_batch, batch_wait_timeout_s=wait_s)
        async def decide(self, states: list[dict[str, Any]]) -> list[dict[str, Any]]:
            encoded = [self.adapter.encode(s) for s in states]
            obs = self.np.array([o for o, _ in encoded])
            mask = self.np.array([m for _, m in encoded])
            res = self.versions.act(self.module, obs, mask)
            return [
                {
                    "action": self.adapter.action_value(int(i), s),
                    "action_index": int(i),
                    "version": self.version,
                }
                for i, s in zip(res.actions.tolist(), states, strict=True)
            ]

        async def __call__(self, request: Request) -> JSONResponse:
            if request.method == "GET":  # the bench's check that the weights are croupier's
                return JSONResponse({"weights": self.digest})
            body = await request.json()
            return JSONResponse(await self.decide(body["state"]))

    return LearnedPolicy.bind()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=MAX_BATCH)
    parser.add_argument("--batch-wait-s", type=float, default=BATCH_WAIT_S)
    args = parser.parse_args(argv)

    import ray
    from ray import serve

    # One CPU per replica, plus nothing: Serve's controller and proxy take no CPU reservation.
    ray.init(num_cpus=args.replicas, include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    serve.run(build_app(args.replicas, args.max_batch, args.batch_wait_s), route_prefix="/decide")
    print("READY", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    ray.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
