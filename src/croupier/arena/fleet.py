"""One production version and one canary share for a fleet of policy servers.

Each server keeps its own channel (`policies/channels.py`); a fleet stays consistent because
every change goes to every server, in three steps:

1. **Check all first.** Every server must answer `GET /v1/policies/channels` and, for a
   promotion, hold the version. If any cannot, nothing is changed anywhere (exit 1).
2. **Change each.** Servers already at the target are left alone ("unchanged"), so running the
   same promotion again after a partial failure finishes it instead of failing on the servers
   that took it. A rollback needs servers that agree on production and on what it rolls back
   to; a split fleet is refused (converge it with `--version N`).
3. **Read back.** Every server's channel is read again; the report says, per server, what it
   did and what it holds, and whether the whole fleet now agrees.

There is no distributed transaction: a server that fails between steps 1 and 2 leaves the fleet
split until the command is run again (the report names it; exit 1).
"""

from __future__ import annotations

import asyncio
from typing import Any

from croupier.client import CroupierClient, CroupierError


def _error(e: BaseException) -> str:
    if isinstance(e, CroupierError):
        return str(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


async def _each(
    urls: list[str], admin_key: str | None, call: Any
) -> dict[str, dict[str, Any] | BaseException]:
    """`call(client)` on every server at once; its result or the exception, per URL."""

    async def one(url: str) -> Any:
        async with CroupierClient(url, api_key=admin_key) as client:
            return await call(client)

    results = await asyncio.gather(*(one(u) for u in urls), return_exceptions=True)
    return dict(zip(urls, results, strict=True))


async def _read(urls: list[str], admin_key: str | None) -> dict[str, Any]:
    async def read(client: CroupierClient) -> dict[str, Any]:
        channels = await client.channels()
        channels["versions"] = (await client.policies())["policies"]["learned"]["versions"]
        return channels

    return await _each(urls, admin_key, read)


def _target_reached(state: dict[str, Any], action: str, target: Any) -> bool:
    if action == "canary":
        return state.get("canary_share") == target
    return state.get("production") == target


async def change_fleet(
    urls: list[str],
    action: str,
    *,
    version: int | None = None,
    share: float | None = None,
    admin_key: str | None = None,
    evidence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Promote `version`, roll back, or set the canary `share` on every server of `urls`.
    Returns {"ok", "action", "target", "consistent", "servers": {url: {...}}}; `ok` only when
    every server holds the target at the end."""
    if action not in ("promote", "rollback", "canary"):
        raise ValueError(f"unknown fleet action {action!r}")
    urls = list(dict.fromkeys(u.rstrip("/") for u in urls))  # each server once
    report: dict[str, Any] = {"action": action, "ok": False, "consistent": False}
    servers: dict[str, dict[str, Any]] = {u: {} for u in urls}
    report["servers"] = servers

    # 1. Check all first.
    before = await _read(urls, admin_key)
    refusals: list[str] = []
    for url, state in before.items():
        if isinstance(state, BaseException):
            servers[url].update(result="unreachable", error=_error(state))
            refusals.append(f"{url}: {_error(state)}")
        elif action == "promote" and version not in state["versions"]:
            servers[url].update(result="refused", error=f"version {version} is not loaded")
            refusals.append(f"{url}: version {version} not loaded ({state['versions']})")
    target: Any = {"promote": version, "canary": share}.get(action)
    if action == "rollback" and not refusals:
        targets = {
            (s["production"], s["history"][-1] if s["history"] else None) for s in before.values()
        }
        if len(targets) != 1:
            refusals.append(
                "servers disagree on production or its history "
                f"({sorted(targets, key=str)}): converge them with --version N first"
            )
        else:
            ((_, target),) = targets
            if target is None:
                refusals.append("nothing to roll back to: production has no earlier version")
    report["target"] = target
    if refusals:
        report["refused"] = refusals
        for entry in servers.values():
            entry.setdefault("result", "not changed")
        return report

    # 2. Change each (concurrently: a slow server does not hold up the others).
    async def apply(client: CroupierClient) -> dict[str, Any]:
        state = before[client.base_url]
        if _target_reached(state, action, target):
            return {"result": "unchanged"}
        if action == "promote":
            await client.promote(int(target), evidence)
        elif action == "rollback":
            await client.rollback(evidence)
        else:
            await client.set_canary_share(float(target), evidence)
        return {"result": "changed"}

    applied = await _each(urls, admin_key, apply)
    for url, outcome in applied.items():
        if isinstance(outcome, BaseException):
            servers[url].update(result="failed", error=_error(outcome))
        else:
            servers[url].update(outcome)

    # 3. Read back what every server holds now.
    after = await _read(urls, admin_key)
    for url, state in after.items():
        if isinstance(state, BaseException):
            servers[url]["now"] = {"error": _error(state)}
        else:
            servers[url]["now"] = {
                "production": state["production"],
                "canary_share": state.get("canary_share"),
                "latest": state["latest"],
            }
    reached = [
        not isinstance(s, BaseException) and _target_reached(s, action, target)
        for s in after.values()
    ]
    report["ok"] = all(reached)
    nows = [
        (s["production"], s.get("canary_share"))
        for s in after.values()
        if not isinstance(s, BaseException)
    ]
    report["consistent"] = len(nows) == len(urls) and len(set(nows)) == 1
    return report


def format_report(report: dict[str, Any]) -> str:
    """One line per server, then the verdict (the CLI's text output)."""
    what = {"promote": "production", "rollback": "production", "canary": "canary share"}
    lines = [f"{report['action']}: {what[report['action']]} -> {report.get('target')}"]
    for url, entry in report["servers"].items():
        now = entry.get("now") or {}
        held = (
            f"production {now.get('production')}, canary {now.get('canary_share')}"
            if "production" in now
            else now.get("error", "")
        )
        error = f"  ({entry['error']})" if entry.get("error") else ""
        lines.append(f"  {url}: {entry.get('result')}{error}  {held}".rstrip())
    for refusal in report.get("refused", []):
        lines.append(f"refused, nothing changed: {refusal}")
    if report["ok"]:
        lines.append(f"ok: all {len(report['servers'])} servers hold the target")
    elif "refused" not in report:
        lines.append("NOT ok: the fleet is split; fix the failed servers and run this again")
    return "\n".join(lines)


# `croupier status`: how many versions apart the servers' newest may be before the fleet is
# called split. Servers read at one moment on one trainer differ by a version or two (each
# installs every push as it arrives; ingest lag p90 ~1 version); a server reconnecting after a
# restart catches up within its backoff (at most 5 s). At the 30-minute soak's ~2.2 versions
# a second that is ~11 versions: 50 (~20 s of pushes missed) is a server not getting them.
# A slow learner takes longer to reach 50; the Prometheus rule (CroupierServerNotInstalling)
# looks at whether a server's version moves instead.
MAX_VERSION_SPREAD = 50
# What a server that refused the key is reported as (the key, not the server, is the problem).
KEY_REFUSED = {401: "unauthorized", 403: "forbidden"}


async def fleet_status(
    urls: list[str], api_key: str | None = None, max_version_spread: int = MAX_VERSION_SPREAD
) -> dict[str, Any]:
    """What every server serves and holds: its `/healthz` essentials and its channel (a read
    key is enough). `ok` when every server answered ok and the fleet is not split; `splits`
    says how it is split: production or canary share differing between servers, or their
    newest versions more than `max_version_spread` apart."""
    urls = list(dict.fromkeys(u.rstrip("/") for u in urls))  # each server once

    async def one(client: CroupierClient) -> dict[str, Any]:
        health = await client.health()
        channels = await client.channels()
        link = health.get("trainer_link") or {}
        episodes = health.get("episodes") or {}
        return {
            "status": health.get("status"),
            "latest": health.get("version"),
            "production": channels.get("production"),
            "canary_share": channels.get("canary_share"),
            "trainer_connected": link.get("connected") if link else None,
            "spooled": episodes.get("spooled"),
            "dropped": episodes.get("dropped"),
            "fallbacks": health.get("fallbacks"),
            "games_in_flight": health.get("games_in_flight"),
        }

    def failed(e: BaseException) -> dict[str, Any]:
        status = isinstance(e, CroupierError) and KEY_REFUSED.get(e.status)
        return {"status": status or "unreachable", "error": _error(e)}

    results = await _each(urls, api_key, one)
    servers = {url: failed(r) if isinstance(r, BaseException) else r for url, r in results.items()}
    answered = {u: s for u, s in servers.items() if s["status"] == "ok"}
    splits = []
    for key in ("production", "canary_share"):
        if len({s[key] for s in answered.values()}) > 1:
            splits.append(f"{key} differs: " + _by_server(answered, key))
    latest = [s["latest"] for s in answered.values() if isinstance(s["latest"], int)]
    if latest and max(latest) - min(latest) > max_version_spread:
        splits.append(
            f"latest versions {max(latest) - min(latest)} apart (more than "
            f"{max_version_spread}): " + _by_server(answered, "latest")
        )
    return {
        "ok": len(answered) == len(servers) and not splits,
        "consistent": len(answered) == len(servers) and not splits,
        "splits": splits,
        "servers": servers,
    }


def _by_server(servers: dict[str, dict[str, Any]], key: str) -> str:
    return ", ".join(f"{url} {s[key]}" for url, s in servers.items())


def format_status(report: dict[str, Any]) -> str:
    cols = (
        "status", "latest", "production", "canary_share", "trainer_connected", "spooled",
        "fallbacks",
    )  # fmt: skip
    lines = ["server  " + "  ".join(cols)]
    for url, s in report["servers"].items():
        if "error" in s:
            lines.append(f"{url}  {s['status']} ({s['error']})")
        else:
            lines.append(f"{url}  " + "  ".join(str(s.get(c)) for c in cols))
    down = [s["status"] for s in report["servers"].values() if s["status"] != "ok"]
    if down:
        lines.append(
            f"NOT ok: {len(down)} of {len(report['servers'])} servers not ok "
            f"({', '.join(sorted(set(down)))})"
        )
    lines.extend(f"NOT ok: the fleet is split: {split}" for split in report["splits"])
    if report["ok"]:
        lines.append("ok; one production version and canary share")
    return "\n".join(lines)
