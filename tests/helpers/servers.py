"""An app served by uvicorn on a thread of this process (versions installed directly)."""

from __future__ import annotations

import threading

import uvicorn

from croupier.local_server import free_port
from tests.conftest import wait_for

GAME = "leduc-holdem"


class ThreadServer:
    """The app served by uvicorn on a thread: the test can install versions directly."""

    def __init__(self, game: str = GAME, **config):
        from croupier.api.app import create_app
        from croupier.config import ServerConfig

        self.app = create_app(ServerConfig(game=game, **config))
        self.service = self.app.state.service
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        wait_for(lambda: self.server.started, 30, what="uvicorn start")
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(30)
