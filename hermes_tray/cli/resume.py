"""``hermes-tray resume SESSION [--home H] [--wait]``: continue an interrupted turn through Hermes (docs/cli.md:
what it prints, its exit codes). Without ``--wait`` a detached worker (``resume_worker``) carries it to the end.

Signals are handled so that a turn is never run twice whatever happens to this process:

* SIGINT, SIGTERM, SIGHUP: your Stop (``session.interrupt``, its marker retired, the outcome recorded), or, when
  a Hermes window shares the session, no interrupt and the turn left to that window (``detached``); exit 4;
* SIGTSTP: refused while the continuation runs (a stopped client cannot retire the marker of a turn Hermes
  finishes meanwhile); said once on stderr;
* SIGSTOP / SIGKILL: the continuation's marker carries its completion mark, and whoever reads it next settles it
  from Hermes' ``state.db`` (``core.continuing.completion``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from hermes_tray.cli.common import print_json, refuse, refuse_unusable_homes, selected_homes, warn
from hermes_tray.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_STOPPED, EXIT_USAGE

if TYPE_CHECKING:
    from hermes_tray_core import Turn

STOP_NOTE = "Ctrl-C stops it for good, as Hermes' own Stop does."
STOPPED_TEXT = "Stopped as you asked. The turn ended for good."  # the outcome's message (--json, the journal)
#: instead of the tray's "If it is listed above, Resume tries again." (nothing is listed here)
AGAIN_TEXT = "`hermes-tray status` shows whether it can be resumed again."


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "resume", parents=[common], help="continue an interrupted turn through Hermes",
        description="Continue an interrupted turn through Hermes, exactly once. Without --wait, returns once "
                    "the continuation has started and a background helper finishes it.",
    )
    p.add_argument("session", metavar="SESSION", help="session key of the interrupted turn (see `status`)")
    p.add_argument("--wait", action="store_true", help="stay until the continuation ends; print progress")
    p.set_defaults(func=run)
    # The background worker of a frozen build (``_resume-worker``) is no command: cli.main starts it before
    # parsing, so a mistyped command never lists it among the choices.


def _find(args: argparse.Namespace) -> tuple[Turn | None, str | None]:
    """(the turn, or why there is none) for the requested session across the selected homes."""
    from hermes_tray_core import MarkerStoreError, Turn, list_turn_markers, look_at_homes

    found = []
    problems = []
    homes = selected_homes(args)
    for home, seen in zip(homes, look_at_homes([h.path for h in homes]), strict=True):
        if seen.problem and seen.exists:  # cannot be read (or hangs): never touched again, said why
            problems.append(seen.problem)
            continue
        try:
            entry = list_turn_markers(home.path).get(args.session)
        except MarkerStoreError as exc:
            problems.append(f"{home.path}: {exc.user_message}")
            continue
        if entry is not None:
            found.append((home, entry))
    if len(found) == 1:
        home, entry = found[0]
        return Turn.of(home.path, args.session, entry), None  # the door: the session was checked by run()
    if len(found) > 1:
        where = ", ".join(str(h.path) for h, _ in found)
        return None, f"session {args.session} has interrupted turns in several homes ({where}): pick one with --home"
    extra = f" ({'; '.join(problems)})" if problems else ""
    return None, f"no interrupted turn for session {args.session} in the selected homes{extra}"


def progress_text(p: Any) -> str | None:
    """A continuation's progress in plain words (None: nothing new to say; the outcome line follows)."""
    if p.phase == "waiting-for-backend":
        return "Waiting for your Hermes to start…"
    if p.phase == "waiting-for-release":
        return "Waiting for your Hermes to let go of the session the tray left there…"
    if p.phase in ("starting", "resuming"):
        return "Continuing in your running Hermes…" if p.ran_in == "running-backend" else \
            "Starting Hermes for this turn…"
    if p.phase == "running":
        if str(p.last_frame or "").startswith("tool"):
            return "Hermes is using tools…"
        return "Hermes is answering…" if p.frames else "Hermes is continuing the turn…"
    if p.phase == "stopping":
        return "Stopping…"
    return None


def run(args: argparse.Namespace) -> int:
    from hermes_tray_core import InvalidIdError, validate_session_id

    try:
        validate_session_id(args.session, what="session")
    except InvalidIdError as exc:
        return refuse(args, exc.user_message, EXIT_USAGE)
    refused = refuse_unusable_homes(args, selected_homes(args))
    if refused is not None:
        return refused
    turn, problem = _find(args)
    if turn is None:
        return refuse(args, f"Not resumed: {problem}.")
    if args.wait:
        return _run_wait(args, turn)
    return _run_background(args, turn)


def outcome_text(result: dict[str, Any]) -> str:
    """The short line for how a resume ended (``hermes_tray.words``), from the result's typed fields."""
    from hermes_tray import words

    stopped = result.get("outcome") == "stopped" or result.get("stopped_by") == "you"
    outcome = result.get("outcome", "error")
    e = words.ending("interrupted" if outcome == "stopped" else outcome, code=str(result.get("code") or ""),
                     verdict=str(result.get("verdict") or ""), stopped=stopped, attempts=result.get("attempt"),
                     ran_in=str(result.get("ran_in") or "") if result.get("attempt") else "")
    can_do = AGAIN_TEXT if e.can_do == words.RESUME_AGAIN else e.can_do
    line = " ".join(x for x in (f"{e.what}.", e.why, can_do) if x)
    if stopped and result.get("marker_left"):  # the stop could not be written to Hermes' own file
        line += (f" Hermes' file could not be changed ({result['marker_left']}), so the tray keeps the stop in its "
                 f"own records and never resumes it; once the home can be written, `hermes-tray skip "
                 f"{result.get('session_key')}` clears it.")
    return line


def stop_outcome(result: dict[str, Any]) -> dict[str, Any]:
    """The result of a run your signal stopped, as the command reports it (exit 4, docs/cli.md): the tray stopped
    it for good (``stopped``), or left it to a Hermes window that shares the session (``detached``). Any other
    ending (it finished, was refused, failed on its own) stays as it was."""
    out = dict(result)
    if out.get("outcome") == "interrupted" and out.get("stopped_by") == "you":
        out.update(outcome="stopped", exit_code=EXIT_STOPPED, message=STOPPED_TEXT)
    elif out.get("outcome") == "detached" and out.get("stopped_by") == "you":
        out.update(exit_code=EXIT_STOPPED)
    return out


def _outcome(args: argparse.Namespace, result: dict[str, Any]) -> int:
    code = int(result.get("exit_code", EXIT_FAILED))
    if args.json:
        print_json({"ok": code == EXIT_OK, **result})
        return code
    line = outcome_text(result)
    if code == EXIT_OK:
        print(line)
        return code
    if result.get("code") == "home-read-only":  # one line: where Hermes cannot write, and what to do
        warn(str(result.get("message") or line))
        return code
    warn(line)
    message = str(result.get("message") or "")
    if message and code != EXIT_STOPPED:  # a stop is said in one line; failures and refusals add Hermes' facts
        warn(f"Details: {message}")  # Hermes' facts as the engine states them (pids, paths, reasons)
    return code


def _run_wait(args: argparse.Namespace, turn: Turn) -> int:
    from hermes_tray_core import Callbacks, StopReason, StopRequest, resume_turn

    stop = StopRequest()
    quiet = bool(args.json)
    said: set[str] = set()

    def say(text: str) -> None:
        with suppress(OSError, ValueError):  # after SIGHUP the terminal may be gone: never break the clean stop
            print(text, file=sys.stderr, flush=True)

    def on_stop(sig: int, _frm: Any) -> None:
        if not stop.is_set():  # how it ended is said once, by the outcome line
            say(f"\n{signal.Signals(sig).name}: stopping… Another signal does not speed it up.")
        stop.request(StopReason.USER)  # your Stop (docs/cli.md): also SIGTERM and SIGHUP, which you sent

    def on_tstp(_sig: int, _frm: Any) -> None:
        if "tstp" not in said:
            said.add("tstp")
            say("\nhermes-tray: a continuation is running and cannot be paused (its bookkeeping would wait while "
                "Hermes goes on). Ctrl-C stops it cleanly.")

    handlers: dict[int, Callable[[int, Any], None]] = {
        getattr(signal, name): handler for name, handler in (
            ("SIGINT", on_stop), ("SIGTERM", on_stop), ("SIGHUP", on_stop), ("SIGTSTP", on_tstp))
        if hasattr(signal, name)}
    old = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    last: list[Any] = [None, 0.0]  # the last progress line and when it was printed

    def started() -> None:
        # said once the turn is ours to continue (the claim won, the checks passed): a resume that loses a
        # race or is refused never says "Resuming" before "Not resumed"
        if not quiet and "started" not in said:
            said.add("started")
            print(f"Resuming {args.session}. {STOP_NOTE}", flush=True)

    def progress(p: Any) -> None:
        if p.phase != "waiting-for-backend":
            started()
        if quiet:
            return
        text, now = progress_text(p), time.monotonic()
        if text and (text != last[0] or now - last[1] >= 30.0):
            again = text == last[0]
            print(f"{text} ({p.elapsed:.0f} s)" if again else text, flush=True)
            last[0], last[1] = text, now

    try:
        result = resume_turn(turn, listener=Callbacks(on_progress=progress, on_dispatched=lambda _res: started()),
                             stop=stop, via="cli")
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
    outcome = result.to_dict()
    if stop.is_set():
        outcome = stop_outcome(outcome)
    if not quiet and outcome.get("outcome") == "completed":
        print("Done.", flush=True)
    try:
        return _outcome(args, outcome)
    except (OSError, ValueError):  # the terminal went away (SIGHUP): the journal has the outcome
        return int(outcome["exit_code"])


def _run_background(args: argparse.Namespace, turn: Turn) -> int:
    from hermes_tray.cli.resume_worker import LOG_NAME, worker_argv
    from hermes_tray_core import child_environment, ensure_private_dir, log_dir, open_private_append

    log_path = log_dir() / LOG_NAME
    try:
        ensure_private_dir(log_dir())
        errfd = open_private_append(log_path)  # 0600, and never through a symlink planted there
    except OSError as exc:
        return refuse(args, f"Not resumed: cannot open the background helper's log {log_path} ({exc}); "
                      "use --wait, or fix the log folder.")
    kwargs: dict[str, Any] = {}
    if sys.platform == "win32":
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | getattr(subprocess, "DETACHED_PROCESS", 0)
    else:
        kwargs["start_new_session"] = True
    with os.fdopen(errfd, "ab") as errlog:
        proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
            # a frozen app's worker is a fresh instance of it, not a bootloader child that shares our bundle env
            worker_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, close_fds=True,
            env=child_environment(), **kwargs)
    assert proc.stdin is not None and proc.stdout is not None
    request = {"home": turn.home, "session_key": turn.key, "expected": turn.marker.raw, "via": "cli"}
    with suppress(OSError):
        proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
        proc.stdin.close()
    try:
        for raw in iter(proc.stdout.readline, b""):
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if msg.get("event") == "dispatched":
                text = (f"Resuming {args.session}: try {msg.get('attempt')} started. A background helper finishes "
                        "it. `hermes-tray history` shows how it ends.")
                if args.json:
                    print_json({"ok": True, "outcome": "started", "session_key": args.session,
                                "home": str(turn.path), **{k: v for k, v in msg.items() if k != "event"}})
                else:
                    print(text)
                return EXIT_OK
            if msg.get("event") == "result":
                proc.wait(timeout=30)
                return _outcome(args, msg)
    except KeyboardInterrupt:
        # Your Ctrl-C, passed on as one (the worker's SIGTERM is a shutdown: it would only stop following)
        if sys.platform == "win32":
            proc.terminate()
        else:
            proc.send_signal(signal.SIGINT)
        warn("Stopping…")
        try:
            out, _err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _err = proc.communicate()
        for raw in reversed(out.splitlines()):
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("event") == "result":
                return _outcome(args, stop_outcome(msg))
        return refuse(args, f"the background helper stopped before it said how (see {log_dir()})", EXIT_FAILED)
    code = proc.wait(timeout=30)
    return refuse(args, f"the background helper exited unexpectedly (exit {code}); see {log_dir()}",
                  EXIT_FAILED if code else EXIT_REFUSED)
