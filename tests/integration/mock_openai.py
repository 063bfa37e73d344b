"""A loopback stand-in for an OpenAI-compatible server, for driving the real Hermes gateway.

Serves ``GET /v1/models`` and ``POST /v1/chat/completions`` (streaming SSE or plain JSON),
records every request it receives, and can hold a request open (``hold()``) so a turn is
reliably mid-run when a test SIGKILLs the gateway. A *script* (``play([...])``) makes the next agent
requests answer with tool calls (:class:`ToolCalls`) or with a reply streamed slowly, word by word
(:class:`Slow`), so a test can kill a turn after its tool calls, in the middle of its answer.
Runs in a thread of the test process, or standalone (``python mock_openai.py --port-file F --record F``)
for manual runs.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "mock-model"
TITLE_PREFIX = "Generate a short, descriptive title"  # Hermes' auxiliary title request: never scripted


@dataclass(frozen=True)
class ToolCalls:
    """A scripted answer: the model asks for these tool calls, ``(name, arguments)`` each, in one message."""

    calls: tuple[tuple[str, dict[str, Any]], ...]


@dataclass(frozen=True)
class Slow:
    """A scripted answer: ``text`` streamed one word every ``every`` seconds (``words_sent`` counts them)."""

    text: str
    every: float = 0.5


@dataclass
class Recorded:
    """One request as received: method, path, parsed JSON body (or None) and arrival time; ``answered`` once the
    whole answer went out (a client gone mid-answer never got one)."""

    method: str
    path: str
    body: Any
    at: float = field(default_factory=time.time)
    answered: bool = False

    @property
    def messages(self) -> list[dict]:
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return self.body["messages"]
        return []

    def text(self) -> str:
        """All message contents joined, for "does the request carry X" assertions."""
        parts: list[str] = []
        for m in self.messages:
            c = m.get("content")
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):
                parts.extend(str(p.get("text", "")) for p in c if isinstance(p, dict))
        return "\n".join(parts)

    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                c = m.get("content")
                if isinstance(c, list):
                    return "\n".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
                return str(c or "")
        return ""


class MockOpenAI:
    """The server plus its knobs. ``reply`` is the assistant text every completion returns."""

    def __init__(self, reply: str = "Done: the task is finished.", record_file: Path | None = None) -> None:
        self.reply = reply
        self.record_file = record_file
        self.requests: list[Recorded] = []
        self.delay = 0.0  # seconds to sleep before answering each completion
        self.words_sent = 0  # words of the current Slow answer written to the client so far
        self._script: list[ToolCalls | Slow] = []
        self._cond = threading.Condition()
        self._held = False
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ── knobs ────────────────────────────────────────────────────────────
    def hold(self) -> None:
        """From now on completions block (after being recorded) until :meth:`release`."""
        with self._cond:
            self._held = True

    def release(self) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()

    def play(self, steps: list[ToolCalls | Slow]) -> None:
        """The next agent requests (not Hermes' title requests) answer with ``steps``, one each, in order;
        then the plain ``reply`` again."""
        with self._cond:
            self._script = list(steps)
            self.words_sent = 0

    def wait_for_words(self, n: int, timeout: float = 60.0) -> None:
        """Block until ``n`` words of a :class:`Slow` answer went out; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.words_sent < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the mock streamed {self.words_sent} word(s), wanted {n}")
                self._cond.wait(left)

    def _next_step(self, body: Any) -> ToolCalls | Slow | None:
        msgs = body.get("messages") if isinstance(body, dict) else None
        first = msgs[0].get("content") if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) else None
        if isinstance(first, str) and first.startswith(TITLE_PREFIX):
            return None
        with self._cond:
            return self._script.pop(0) if self._script else None

    def _sent_word(self) -> None:
        with self._cond:
            self.words_sent += 1
            self._cond.notify_all()

    def completions(self) -> list[Recorded]:
        with self._cond:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def wait_for_completions(self, n: int, timeout: float = 30.0) -> list[Recorded]:
        """Block until at least ``n`` completion requests arrived; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [r for r in self.requests if r.path.endswith("/chat/completions")]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"mock server saw {len(got)} completion request(s), wanted {n}")
                self._cond.wait(left)

    # ── lifecycle ────────────────────────────────────────────────────────
    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, port: int = 0) -> MockOpenAI:
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _send_json(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                mock._record("GET", self.path, None)
                if self.path.rstrip("/").endswith("/models"):
                    self._send_json(200, {"object": "list", "data": [
                        {"id": MODEL, "object": "model", "created": 0, "owned_by": "mock",
                         "context_length": 131072}]})
                else:
                    self._send_json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                rec = mock._record("POST", self.path, body)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send_json(404, {"error": {"message": "not found"}})
                    return
                mock._wait_released()
                if mock.delay:
                    time.sleep(mock.delay)
                stream = isinstance(body, dict) and bool(body.get("stream"))
                model = (body or {}).get("model") or MODEL
                cid = "chatcmpl-" + uuid.uuid4().hex[:12]
                step = mock._next_step(body)
                if isinstance(step, ToolCalls):
                    self._tool_calls(step, stream, cid, model, rec)
                    return
                text = step.text if isinstance(step, Slow) else mock.reply
                if not stream:
                    self._send_json(200, {
                        "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
                    mock._answered(rec)
                    return
                self._start_stream()
                words = text.split(" ")
                chunks = [{"role": "assistant", "content": ""}] + [
                    {"content": (w if i == 0 else " " + w)} for i, w in enumerate(words)]
                try:
                    for i, delta in enumerate(chunks):
                        self._sse({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                                   "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                        if isinstance(step, Slow) and i:
                            mock._sent_word()
                            time.sleep(step.every)
                    self._sse({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                               "model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": len(words),
                                         "total_tokens": 10 + len(words)}})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    mock._answered(rec)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

            def _start_stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

            def _tool_calls(self, step: ToolCalls, stream: bool, cid: str, model: str, rec: Recorded) -> None:
                calls = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args)}} for name, args in step.calls]
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                if not stream:
                    self._send_json(200, {
                        "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                        "choices": [{"index": 0, "finish_reason": "tool_calls",
                                     "message": {"role": "assistant", "content": None, "tool_calls": calls}}],
                        "usage": usage})
                    mock._answered(rec)
                    return
                self._start_stream()
                deltas = [{"role": "assistant", "content": None,
                           "tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}]
                try:
                    for delta in deltas:
                        self._sse({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                                   "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                    self._sse({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                               "model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                               "usage": usage})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    mock._answered(rec)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

            def _sse(self, obj: Any) -> None:
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="mock-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> MockOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ── internals ────────────────────────────────────────────────────────
    def _record(self, method: str, path: str, body: Any) -> Recorded:
        rec = Recorded(method, path, body)
        with self._cond:
            self.requests.append(rec)
            self._cond.notify_all()
        if self.record_file is not None:
            with open(self.record_file, "a", encoding="utf-8") as f:
                f.write(json.dumps({"method": method, "path": path, "body": body, "at": rec.at}) + "\n")
        return rec

    def _answered(self, rec: Recorded) -> None:
        with self._cond:
            rec.answered = True
            self._cond.notify_all()

    def _wait_released(self) -> None:
        with self._cond:
            while self._held:
                self._cond.wait(0.5)


def write_hermes_config(home: Path, base_url: str, *, extra: str = "") -> Path:
    """A ``config.yaml`` pointing Hermes at the mock (``provider: custom``) with a dummy key."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "config.yaml"
    cfg.write_text(
        "model:\n"
        "  provider: custom\n"
        f"  base_url: {base_url}\n"
        f"  default: {MODEL}\n"
        "  api_key: sk-mock-dummy\n" + extra,
        encoding="utf-8",
    )
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", type=Path)
    ap.add_argument("--record", type=Path)
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    mock = MockOpenAI(record_file=args.record).start(args.port)
    mock.delay = args.delay
    if args.port_file:
        args.port_file.write_text(str(mock.port))
    print(mock.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        mock.stop()


if __name__ == "__main__":
    main()
