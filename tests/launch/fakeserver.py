"""A small OpenAI-style server for fast launch tests: ``fakeserver.py MODE PORT``.

Modes: ok (ready line, health, streaming chat), fatal (prints a fatal SGLang-style line and a
traceback, stays alive), stall (prints one line and goes quiet), escape (forks a child that
leaves the process group and ignores SIGTERM, then serves like ok), stubborn (ignores SIGTERM,
serves like ok), secret (prints a token in its log, serves like ok).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt: str, *args: object) -> None:
        sys.stdout.write("INFO: " + (fmt % args) + "\n")
        sys.stdout.flush()

    def _json(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._json(200, {"data": [{"id": "fake"}]})
        else:
            self._json(404, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if not body.get("stream"):
            msg = {"role": "assistant", "content": "Hello there."}
            self._json(200, {"choices": [{"message": msg}], "usage": {"completion_tokens": 3}})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for piece in ("Hello", " there", "."):
            chunk = {"choices": [{"delta": {"content": piece}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        done = {"choices": [{"delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())


def serve(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"INFO:     Uvicorn running on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
    print("INFO:     Started server process", flush=True)
    if mode == "fatal":
        print("Scheduler hit an exception: Traceback (most recent call last):", flush=True)
        time.sleep(0.2)
        print("RuntimeError: CUDA error: out of memory", flush=True)
        time.sleep(3600)
    if mode == "stall":
        time.sleep(3600)
    if mode == "escape" and os.fork() == 0:  # the child leaves the group, ignores SIGTERM
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
        os._exit(0)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "secret":
        print("using token hf_abcdefghijklmnopqrstuvwxyz0123", flush=True)
    serve(port)


if __name__ == "__main__":
    main()
