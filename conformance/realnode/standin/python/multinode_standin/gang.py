"""What every gang stand-in shares: the verdict line the box reads from the container's log, and a small HTTP
server answering the probes the rendered pods ask (/health, /v1/health/ready ...) once the gang has formed.

The verdict line is `MULTINODE_GANG {json}` on stdout (the kubelet's container log; conformance/cluster/gangs.go
collects it, conformance/cluster/gang_check.py judges it against placement.json)."""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARKER = "MULTINODE_GANG "


def say(msg: str) -> None:
    print(f"multinode box stand-in: {msg}", flush=True)


def verdict(engine: str, formed: bool, world_size: int, expected: int, **extra: Any) -> None:
    """One line, flushed at once (the box may read the log while the process keeps running)."""
    rec = {"engine": engine, "formed": formed, "worldSize": world_size, "expected": expected, **extra}
    print(MARKER + json.dumps(rec, sort_keys=True), flush=True)


def serve(port: int, what: str, model: str = "stand-in") -> None:
    """Answer every GET with 200 and a small JSON body (a model list for /v1/models), on 0.0.0.0:port, forever.
    The real server's answers are not imitated beyond that: the probes only need a listener that answers."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.rstrip("/").endswith("/models"):
                body: dict[str, Any] = {"object": "list", "data": [{"id": model, "object": "model"}]}
            else:
                body = {"status": "ok", "standIn": what}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: Any) -> None:
            pass   # the kubelet's probes every few seconds would fill the log

    srv = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    say(f"{what}: serving the probes on port {port} (no model runs here)")
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def block() -> None:
    """Stay up like the server would, until the container is stopped."""
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit("multinode_standin.gang is a library")
