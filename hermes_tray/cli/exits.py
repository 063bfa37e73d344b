"""The exit codes every command follows, and the hidden worker entry: a leaf every command module imports,
so no command imports the dispatcher back (README "Command line" prints the table; docs/cli.md too)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_REFUSED = 1  # nothing done, the reason printed (no home found, not actionable, no display…)
EXIT_NO = 1  # a question answered "no", as `test` does: `autostart status` when start at login is off
EXIT_USAGE = 2  # the command line itself is wrong
EXIT_FAILED = 3  # `resume --wait`: the continuation ran and failed
EXIT_STOPPED = 4  # `resume --wait`: you stopped it (Ctrl-C / SIGTERM): the turn ended for good
EXIT_INTERRUPTED = 130  # Ctrl-C before anything was done
EXIT_PIPE_CLOSED = 141  # the reader of the output went away (`| head`), as 128 + SIGPIPE


#: The background worker of ``resume`` in a frozen build, where ``python -m`` is not available: an internal
#: entry, started before parsing so that it is never offered as a command (``resume_worker.worker_argv``).
RESUME_WORKER = "_resume-worker"
