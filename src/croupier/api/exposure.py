"""What `croupier serve` says at start when it is reachable beyond this machine unprotected.

Without API keys every route an engine uses is open to whoever reaches the port; without TLS
the keys and game states cross the network in clear. On loopback neither matters (only this
machine can connect); anywhere else each gets a warning in the log (see docs/security.md).
"""

from __future__ import annotations

from croupier.api.hosts import is_loopback
from croupier.config import ServerConfig


def exposure_warnings(host: str, config: ServerConfig, tls: bool) -> list[str]:
    """The warnings for serving `config` on `host` (none on loopback)."""
    if is_loopback(host):
        return []
    out = []
    if not (config.api_keys or config.admin_keys):
        out.append(
            f"serving on {host} without API keys: anyone who reaches this port can create "
            "games, read decisions and feed episodes to training (set --api-keys and "
            "--admin-keys, or bind 127.0.0.1 behind a proxy that authenticates)"
        )
    if not tls:
        out.append(
            f"serving plain HTTP on {host}: API keys and game states cross the network in "
            "clear (use --ssl-certfile/--ssl-keyfile, or a TLS-terminating proxy)"
        )
    return out
