"""Pid files that name one process, not whatever process later gets its number.

A pid file left behind (a crash, a SIGKILL, a reboot) can name a pid that the kernel has
since given to an unrelated process; killing its process group would kill someone else's
work (issue 27). So a pid file holds the pid and the process's start time (field 22 of
``/proc/<pid>/stat``, clock ticks since boot), and ``read_pid`` hands the pid out only
while a process of that pid with that start time exists. A file without a start time (an
older version's) cannot be checked and names no process.
"""

from __future__ import annotations

from pathlib import Path


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the name (field 2) may hold spaces and parentheses: count from the last ")"
    return stat[stat.rindex(")") + 2:].split()[19]


def write_pid(path: Path, pid: int) -> None:
    path.write_text(f"{pid} {start_time(pid) or '?'}\n")


def read_pid(path: Path) -> int:
    """The pid ``path`` names, while that very process lives; ``ValueError`` otherwise
    (also for a file that is not a pid file), ``OSError`` if it cannot be read."""
    fields = path.read_text().split()
    if len(fields) != 2 or not fields[0].isdigit():
        raise ValueError(f"{path}: not a pid file of this version ('<pid> <start time>')")
    pid = int(fields[0])
    if start_time(pid) != fields[1]:
        raise ValueError(f"{path}: process {pid} is gone or is another process now")
    return pid


def process_identity(pid: int) -> str:
    """``pid:start``: one process, which ``alive`` can tell from a later one of its pid."""
    return f"{pid}:{start_time(pid) or '?'}"


def alive(identity: str) -> bool:
    """Whether the process ``process_identity`` named still runs (a malformed one: no)."""
    pid, _, started = identity.partition(":")
    return pid.isdigit() and started != "?" and start_time(int(pid)) == started
