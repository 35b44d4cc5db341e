"""A stand-in for ``python -m asv`` in the fault tests (tests/test_faults.py).

Put ``tests/fake_asv`` first on PYTHONPATH. ``run`` reads the HASHFILE like asv, writes a
per-sample record through the real kperf.core.record and a results file; ``publish`` writes
``index.json`` and ``index.html`` where ``--html-dir`` says. ``FAKE_ASV_RUN`` /
``FAKE_ASV_PUBLISH`` choose what happens next:
``ok`` (exit 0), ``fail`` (exit 2), ``kill`` (SIGKILL itself), ``sleep`` (print READY and
write ``asv-ready`` in the root, wait ``FAKE_ASV_SLEEP`` seconds, write a second record,
exit 0). With ``FAKE_ASV_WORKER`` set, ``run`` also starts a measurement worker as a
benchmark would (tests/_worker_handlers.py) and leaves it running; its pid goes to
``worker.pid`` in the root, its folder to ``worker-dir``.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from kperf.core.record import atomic_write_json, write_record  # noqa: E402

args = sys.argv[1:]
command = next(a for a in args if a in ("run", "publish", "machine"))
root = Path(os.environ["FAKE_ASV_ROOT"])
with (root / "asv-calls.log").open("a") as log:
    log.write(" ".join(args) + "\n")
mode = os.environ.get(f"FAKE_ASV_{command.upper()}", "ok")
machine = os.environ.get("KPERF_MACHINE", "fault-box")

if command == "run":
    hashfile = next(a for a in args if a.startswith("HASHFILE:"))[len("HASHFILE:"):]
    commit = Path(hashfile).read_text().split()[0]
    os.environ.update(ASV_COMMIT=commit, ASV_ENV_NAME="fake-env")
    write_record("bench_fake.FakeTime.track_time", {"case": "first"},
                 {"samples": [1.0, 1.1], "clocks": [1500, 1500]})
    atomic_write_json(root / ".asv" / "results" / machine / f"{commit[:8]}-fake-env.json",
                      {"commit_hash": commit, "results": {}})
    if os.environ.get("FAKE_ASV_WORKER"):  # a benchmark's measurement worker, left running
        from kperf.core.worker import WorkerClient, WorkerSpec

        handler = f"{REPO / 'tests' / '_worker_handlers.py'}:handle"
        client = WorkerClient(WorkerSpec(handler=handler, sys_path=tuple(sys.path)))
        client.request({"op": "hello from asv"}, 60)
        (pid_file,) = client.dir.glob("*.pid")
        (root / "worker.pid").write_text(pid_file.read_text())
        (root / "worker-dir").write_text(str(client.dir))
elif command == "publish":
    # asv publish writes its site where --html-dir says (kperf/site/publish.py builds beside
    # the live one and swaps it in), relative to the config's folder
    html = Path(args[args.index("--html-dir") + 1]) if "--html-dir" in args else Path("html")
    html = html if html.is_absolute() else root / html
    html.mkdir(parents=True, exist_ok=True)
    (html / "index.json").write_text("{}")
    (html / "index.html").write_text("<html>fake asv site</html>")

if mode == "fail":
    sys.exit(2)
if mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "sleep":
    print("READY", flush=True)
    (root / "asv-ready").write_text(command)  # seen even where the caller holds stdout
    time.sleep(float(os.environ.get("FAKE_ASV_SLEEP", "60")))
    if command == "run":
        write_record("bench_fake.FakeTime.track_time", {"case": "second"},
                     {"samples": [2.0], "clocks": [1400]})
print(json.dumps({"fake-asv": command, "mode": mode}), flush=True)
