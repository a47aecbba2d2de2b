"""The shipped alert rules (examples/prometheus/alerts.yml): valid, unit-tested by promtool,
reading metrics that exist, each with a runbook entry, and seen to fire on what real
`croupier serve` processes (and a trainer that is not there) expose: a trainer down, a split
fleet, fallbacks."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from croupier.api.metrics import EXPORTED
from croupier.games.registry import load_adapter
from croupier.link.server import LINK_COUNTERS
from croupier.policies.learned import PolicyVersions
from croupier.trainer.metrics import TrainerCollector
from tests.conftest import free_port, running_server_logged
from tests.helpers.alerts import (
    RULES,
    RULES_TEST,
    Target,
    check_alerts,
    expected,
    metric_names,
    promtool,
    rules,
    scrape,
)

ROOT = Path(__file__).resolve().parents[1]
GAME = "leduc-holdem"


# --- the rules themselves -------------------------------------------------------------------


@pytest.mark.integration
def test_promtool_checks_the_rules_and_passes_their_unit_tests():
    tool = promtool()
    for args in (["check", "rules", str(RULES)], ["test", "rules", str(RULES_TEST)]):
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"SUCCESS: {len(rules())} rules found"
        in subprocess.run(
            [tool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
        ).stdout
    )


def _trainer_names() -> set[str]:
    """The names the trainer's /metrics exports (every number present)."""
    progress = {
        "iteration": 3, "weights_seq_no": 3, "connected_servers": 1, "env_steps_per_s": 1.0,
        "learner_steps_per_s": 1.0, "episode_return_mean": 0.0, "payoff_per_hand": 0.0,
        "waiting_steps": 0, "unacked_episodes": 0, "idle_s": 1.0, "trained_share": 1.0,
        "env_steps_trained": 10, **dict.fromkeys(LINK_COUNTERS, 1),
    }  # fmt: skip
    trainer = SimpleNamespace(
        last_progress=progress, last_lag_histogram={}, algo=None, state="training",
        options=SimpleNamespace(hyper=SimpleNamespace(train_batch_size=4000)),
    )  # fmt: skip
    families = TrainerCollector(trainer).collect()
    return {s.name for f in families for s in f.samples}


def _server_names() -> set[str]:
    names = {f"croupier_{m.name}" + ("_total" if m.kind == "counter" else "") for m in EXPORTED}
    # and the families outside the snapshot table (api/metrics.py: the requests' and the
    # collectors' own failures)
    return names | {"croupier_requests_total", "croupier_request_seconds_bucket",
                    "croupier_metrics_collector_errors_total"}  # fmt: skip


def test_every_metric_an_alert_reads_exists():
    """promtool cannot know a misspelt name (it would simply never fire): check each name
    against what the server and the trainer export."""
    missing = metric_names() - _server_names() - _trainer_names() - {"up"}
    assert not missing, f"the rules read metrics nobody exports: {missing}"


def test_monitoring_lists_every_metric_an_alert_reads():
    """docs/monitoring.md names each metric a rule reads in full (a histogram by its base
    name), so an operator reading an alert finds what its numbers mean."""
    doc = (ROOT / "docs/monitoring.md").read_text()
    names = {re.sub(r"_bucket$", "", n) for n in metric_names() - {"up"}}
    missing = sorted(n for n in names if f"`{n}`" not in doc and f"`{n}{{" not in doc)
    assert not missing, f"monitoring.md does not list {missing}"


def test_the_trainer_exports_its_health_as_a_number():
    for state, healthy in (("training", 1.0), ("idle", 1.0), ("starting", 0.0), ("stopping", 0.0)):
        trainer = SimpleNamespace(last_progress={}, last_lag_histogram={}, algo=None, state=state)
        (family,) = [f for f in TrainerCollector(trainer).collect() if f.name.endswith("healthy")]
        assert family.samples[0].value == healthy, state


def test_every_alert_has_a_severity_a_runbook_entry_and_a_unit_test():
    doc = (ROOT / "docs/operations.md").read_text()
    section = doc[doc.index("### What pages you") :]
    section = section[: re.search(r"\n#{1,3} ", section[4:]).start() + 4]
    tested = RULES_TEST.read_text()
    for rule in rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("page", "ticket"), name
        assert rule["annotations"]["runbook"].endswith(f"what-pages-you: {name}"), name
        assert f"`{name}`" in section, f"{name} has no entry under 'What pages you'"
        firing = re.search(rf"alertname: {name}\n\s+exp_alerts:\n\s+- exp_labels", tested)
        assert firing, f"alerts_test.yml never sees {name} fire"


# --- seen firing on real processes ----------------------------------------------------------


def _weights_dir(path: Path, overflow: bool = False) -> Path:
    """Versions 1-3 as a server writes them. `overflow`: version 3's weights are finite but
    so large that every forward overflows to NaN (a diverged model a server cannot refuse on
    load): each learned decision is answered by the fallback."""
    versions = PolicyVersions(load_adapter(GAME), weights_dir=path)
    base = versions.weights()
    rng = np.random.default_rng(0)
    for v in (1, 2, 3):
        if overflow and v == 3:
            weights = {k: np.sign(rng.standard_normal(w.shape)) * 3e38 for k, w in base.items()}
        else:
            weights = {k: w + 0.01 * v for k, w in base.items()}
        versions.install(v, {k: w.astype(np.float32) for k, w in weights.items()})
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two servers whose trainer is not running (its port answers nothing), one of them with
    a newest version that overflows."""
    tmp = tmp_path_factory.mktemp("fleet")
    trainer = f"127.0.0.1:{free_port()}"
    common = ("--trainer", trainer, "--seats", "learned,rules")
    servers = [
        running_server_logged(*common, "--weights-dir", str(_weights_dir(tmp / n, n == "b")))
        for n in ("a", "b")
    ]
    with contextlib.ExitStack() as stack:
        # Started side by side: each start waits mostly on imports (~10 s on 2 loaded cores).
        with ThreadPoolExecutor(2) as pool:
            starts = [pool.submit(cm.__enter__) for cm in servers]
        for cm, start in zip(servers, starts, strict=True):
            if start.exception() is None:
                stack.push(cm)  # stopped on the way out, also if the other failed to start
        a, b = (start.result() for start in starts)
        yield SimpleNamespace(
            a=a, b=b, servers=[Target("croupier", a.url), Target("croupier", b.url)],
            trainer=Target("croupier-trainer", f"http://127.0.0.1:{free_port()}"),
        )  # fmt: skip


def _promote(url: str, version: int) -> None:
    httpx.post(
        url + "/v1/policies/promote", json={"version": version}, timeout=10
    ).raise_for_status()


@pytest.mark.integration
def test_trainer_down_pages_from_real_scrapes(fleet, tmp_path):
    """A trainer process that is gone: its scrape fails (up 0) and every server's link is
    down. Both alerts fire after their 2 minutes, not before."""
    now = scrape([*fleet.servers, fleet.trainer])
    assert (
        now.samples[
            (
                "up",
                (
                    ("fleet", "prod"),
                    ("instance", fleet.trainer.instance),
                    ("job", "croupier-trainer"),
                ),
            )
        ]
        == 0
    )
    servers = [dict(fleet="prod", instance=t.instance, job="croupier") for t in fleet.servers]
    check_alerts(
        tmp_path,
        [(now, 6)],
        {
            (1, "CroupierTrainerDown"): [],
            (1, "CroupierTrainerLinkDown"): [],
            (3, "CroupierTrainerDown"): [
                expected(
                    "CroupierTrainerDown",
                    fleet="prod",
                    instance=fleet.trainer.instance,
                    job="croupier-trainer",
                )  # fmt: skip
            ],
            (3, "CroupierTrainerLinkDown"): [
                expected("CroupierTrainerLinkDown", **s) for s in servers
            ],
            (3, "CroupierServerDown"): [],
        },
    )


@pytest.mark.integration
def test_a_split_fleet_pages_from_real_scrapes(fleet, tmp_path):
    """Both servers on production 1 and one canary share: silent. One server promoted by
    hand (production 2 against 1) and its canary share changed: both split alerts fire after
    their 2 minutes."""
    for server in (fleet.a, fleet.b):
        _promote(server.url, 1)
    agreed = scrape(fleet.servers)
    _promote(fleet.a.url, 2)
    httpx.post(
        fleet.a.url + "/v1/policies/canary", json={"share": 0.5}, timeout=10
    ).raise_for_status()
    split = scrape(fleet.servers)
    try:
        check_alerts(
            tmp_path,
            [(agreed, 5), (split, 5)],
            {
                (4, "CroupierProductionSplit"): [],
                (4, "CroupierCanarySplit"): [],
                (6, "CroupierProductionSplit"): [],  # pending: 2 minutes not yet passed
                (8, "CroupierProductionSplit"): [expected("CroupierProductionSplit", fleet="prod")],
                (8, "CroupierCanarySplit"): [expected("CroupierCanarySplit", fleet="prod")],
            },
        )
    finally:
        _promote(fleet.a.url, 1)
        httpx.post(fleet.a.url + "/v1/policies/canary", json={"share": 0.0}, timeout=10)


@pytest.mark.integration
def test_an_unfit_model_pages_from_real_scrapes(fleet, tmp_path):
    """Server b's newest version overflows: its learned answers are unfit (invalid), the
    rules answer them (fallback), and the model's page fires for b alone with the fallbacks'
    ticket; a, serving a sound model, stays silent. (The fallbacks' page, a share held for 5
    minutes, is unit-tested in alerts_test.yml.)"""
    from croupier.engine.runner import run_engine

    before = scrape(fleet.servers)
    for server in (fleet.a, fleet.b):
        asyncio.run(run_engine(server.url, GAME, 4, ["learned", "rules"], 20, None))
    after = scrape(fleet.servers)
    b_labels = (("fleet", "prod"), ("instance", fleet.servers[1].instance), ("job", "croupier"))
    a_labels = (("fleet", "prod"), ("instance", fleet.servers[0].instance), ("job", "croupier"))
    for counter in ("croupier_fallbacks_total", "croupier_batcher_invalid_total"):
        counts = {k[1]: v for k, v in after.samples.items() if k[0] == counter}
        assert counts[b_labels] > 0 and counts[a_labels] == 0, (counter, counts)
    on_b = {"fleet": "prod", "instance": fleet.servers[1].instance, "job": "croupier"}
    check_alerts(
        tmp_path,
        [(before, 3), (after, 3)],
        {
            (2, "CroupierModelInvalid"): [],
            (4, "CroupierModelInvalid"): [expected("CroupierModelInvalid", **on_b)],
            (4, "CroupierFallbacksSeen"): [expected("CroupierFallbacksSeen", **on_b)],
        },
    )
