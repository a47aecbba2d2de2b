"""The dashboard in a real browser: headless Chromium against a live server with traffic.

Chromium is Debian's `chromium` package; when it is missing the test installs it with apt-get
(CI is a fresh Debian machine with root) and skips, saying why, only if that is impossible.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from croupier.dashboard.score import score_loop
from tests.conftest import APT_TIMEOUT_S, BackgroundPlay, apt_tool, running_server, wait_for

BROWSER_TIMEOUT_S = 90


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found or apt_tool(("chromium",), ("chromium",))[0]


def browser(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=8000", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)


def chart_points(dom: str, chart: str) -> int:
    match = re.search(rf'<svg[^>]*data-chart="{chart}"[^>]*data-points="(\d+)"', dom)
    assert match, f"chart {chart} not drawn"
    return int(match.group(1))


# Installing chromium on a fresh machine may take minutes: more than the suite's default limit.
@pytest.mark.timeout(APT_TIMEOUT_S * 2 + 300)
def test_dashboard_renders_live_data(tmp_path: Path) -> None:
    binary = chromium()
    with running_server("--game", "leduc-holdem", "--seats", "learned,rules") as url:
        with BackgroundPlay(url, seats=["learned", "rules"], games=4, chunk_s=1.0) as play:
            # a few seconds of history (one sample a second) with decisions in it
            wait_for(
                lambda: (
                    len(
                        [
                            h
                            for h in httpx.get(url + "/dashboard/data.json").json()["history"]
                            if h["decisions_per_s"] > 0
                        ]
                    )
                    >= 4
                ),
                timeout_s=60,
                what="4 seconds of history with traffic",
            )
        assert play.hands > 0 and play.errors == 0
        # a pause in the traffic: seconds with no decisions have no latency (null samples)
        history = lambda: httpx.get(url + "/dashboard/data.json").json()["history"]  # noqa: E731
        wait_for(lambda: history()[-1]["latency_p50_ms"] is None, 15, what="a quiet second")
        # the learning curve: the current version scored against the rules, over HTTP
        results = asyncio.run(score_loop(url, "leduc-holdem", 200, None, report=lambda r: None))
        assert results and results[0].hands >= 200

        def traffic_after_the_pause() -> bool:
            p50 = [h["latency_p50_ms"] for h in history()]
            return None in p50 and any(v is not None for v in p50[p50.index(None) :])

        wait_for(traffic_after_the_pause, 5, what="a sample of the scoring traffic")

        page = url + "/dashboard"
        assert httpx.get(page).headers["content-type"].startswith("text/html")
        dom = browser(binary, tmp_path / "profile", "--dump-dom", page)
        assert dom.returncode == 0, dom.stderr[-2000:]
        html = dom.stdout
        shot = tmp_path / "dashboard.png"
        snap = browser(
            binary, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1400,1500", page
        )
        assert snap.returncode == 0, snap.stderr[-2000:]

    assert re.search(r'<body[^>]*data-rendered="(\d+)"', html), "the page never rendered data"
    for chart in ("decisions", "latency", "games", "ingest", "version"):
        assert chart_points(html, chart) >= 4, chart
    assert chart_points(html, "arena") >= 1
    # lines really drawn: a polyline with points in the decisions and latency charts
    for chart in ("decisions", "latency"):
        svg = re.search(rf'<svg[^>]*data-chart="{chart}".*?</svg>', html, re.S)
        assert svg and re.search(r'<polyline points="[\d.]+,[\d.]+ [\d.]+,', svg.group(0)), chart
    # the pause breaks the latency line: two runs of p50, no straight line across the gap
    latency = re.search(r'<svg[^>]*data-chart="latency".*?</svg>', html, re.S)
    assert latency and len(re.findall(r'<polyline [^>]*data-series="p50"', latency.group(0))) >= 2
    assert 'id="tile-rate">–<' not in html
    # the live arena's table: rows from the traffic's ended games (seat mix learned,rules)
    live = re.search(r'<table id="live-arena">.*?</table>', html, re.S)
    assert live and re.search(r"<td>rules</td><td>[^<]+</td><td>[\d,]+</td>", live.group(0))
    assert "not configured" in html  # no trainer link on this server
    assert shot.exists() and shot.stat().st_size > 10_000
    print(f"dashboard screenshot: {shot}")
