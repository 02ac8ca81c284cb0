"""A pre-imported fork server: each local experiment's measuring process without the start-up.

Importing torch, Numba and the measuring code takes seconds, several times the
measurement of a small kernel. A local run therefore starts one server that
imports them once; each experiment job asks it for its measuring process, and
the server forks one: a process that has imported everything but has started
no thread pool, run no kernel and allocated no data, the same state the
supervisor's own child reaches after its imports. The runs of an experiment
then fork from that process as before, so every run keeps its own allocations,
JIT loads and thread pools.

The job's supervisor hands over its stdout and stderr (SCM_RIGHTS), its
working directory and environment, and waits for the exit status, which the
server sends when the process ends. A supervisor that goes away (its job
cancelled) closes the connection and the server kills the process. The server
itself dies with the Snakemake that started it (PR_SET_PDEATHSIG).

A request the server cannot serve faithfully gets "no" and the supervisor
starts its child the usual way: another interpreter, or an environment that
differs in something read at import time (only the thread-count variables
Snakemake sets per job may differ: the measurement pins thread counts itself).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from accelbench.platform.processes import die_with_parent

# The variable a job finds its server by: the path of the server's socket.
ADDRESS_VARIABLE = "ACCELBENCH_FORK_SERVER"
# What may differ between the server's environment and a job's: the thread counts
# Snakemake sets per job (the measurement pins thread counts itself,
# devices.cpu_threads), its temporary folder, and what the job's shell sets or drops (a
# non-interactive bash unsets the prompts an activated virtual environment exports).
PER_JOB_VARIABLES = frozenset(
    {
        "OMP_NUM_THREADS",
        "GOTO_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "TMPDIR",
        "TMP",
        "TEMP",
        "TEMPDIR",
        "COLUMNS",
        "LINES",
        "_",
        "SHLVL",
        "PWD",
        "OLDPWD",
        "PS1",
        "PS2",
        ADDRESS_VARIABLE,
    }
)
# Variables read only when a library the server leaves unimported is imported (polars
# sizes its thread pool then, so a measurement imports it after choosing threads): the
# measuring process reads them from the job's environment. Snakemake itself imports
# polars while running jobs, so its jobs carry _RJEM_MALLOC_CONF and the server may not.
READ_WHEN_IMPORTED = {"_RJEM_MALLOC_CONF": "polars", "POLARS_MAX_THREADS": "polars"}
_HEADER = struct.Struct("!I")

log = logging.getLogger(__name__)


def _send(connection: socket.socket, message: dict[str, Any], fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    framed = _HEADER.pack(len(data)) + data
    if fds:
        socket.send_fds(connection, [framed], list(fds))
    else:
        connection.sendall(framed)


def _receive(connection: socket.socket, with_fds: bool = False) -> tuple[dict | None, list[int]]:
    """One message (and the descriptors sent with it); None when the peer closed."""
    if with_fds:
        data, fds, _, _ = socket.recv_fds(connection, 1 << 20, 4)
    else:
        data, fds = connection.recv(1 << 20), []
    if not data:
        return None, fds
    (length,) = _HEADER.unpack_from(data)
    while len(data) < _HEADER.size + length:
        more = connection.recv(1 << 20)
        if not more:
            return None, fds
        data += more
    return json.loads(data[_HEADER.size : _HEADER.size + length]), fds


def differing_variables(
    server: dict[str, str], request: dict[str, str], imported: Collection[str] = ()
) -> list[str]:
    """Environment variables whose value differs and that a process with the modules
    `imported` may already have read."""
    unread = {name for name, module in READ_WHEN_IMPORTED.items() if module not in imported}
    names = (set(server) | set(request)) - PER_JOB_VARIABLES - unread
    return sorted(name for name in names if server.get(name) != request.get(name))


# --- the server ---------------------------------------------------------------------


Payload = dict[str, Any]


def _preload(
    families: Collection[str] = (),
) -> tuple[Callable[[Payload], int], Callable[[Payload], None]]:
    """Import what a measuring process of `families` (by name; none named: every
    registered family) needs, here and once (importing starts no thread pool); returns
    the process's body and what to ask before forking it. A process of another family
    makes its own imports after the fork.

    Imported in the server only: the clients (every job's supervisor, the
    Snakefile) import this module and must stay light.
    """
    from accelbench.families import FAMILIES
    from accelbench.job import measurement, measuring_process

    measurement.preload(*(FAMILIES[name] for name in families or FAMILIES))
    return measuring_process.main, measuring_process.before_fork


def _ask_before_fork(before_fork: Callable[[Payload], None], request: dict[str, Any]) -> None:
    """Ask here what the job's process would ask (its answers then serve every later job);
    a question that fails is left to the job, which records why."""
    try:
        before_fork(request["payload"])
    except Exception:  # the job's own process asks again and records the failure
        log.exception("asking before forking the measuring process failed")


def set_by(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """The variables a step set or changed (libraries set some when imported: scikit-learn
    KMP_INIT_AT_FORK, polars _RJEM_MALLOC_CONF)."""
    return {name: value for name, value in after.items() if before.get(name) != value}


def after_imports(
    environment: dict[str, str], before: dict[str, str], imported: dict[str, str]
) -> dict[str, str]:
    """A job's environment once its process has made the server's imports.

    Where the job starts as the server did (or already holds the imports' value, having
    made them itself), the imports leave what they left in the server; a value of the
    job's own stays, and then differs from the server's.
    """
    return {
        **environment,
        **{
            name: value
            for name, value in imported.items()
            if environment.get(name) in (before.get(name), value)
        },
    }


def _measure(
    main: Callable[[Payload], int],
    connection: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    with_imports: Callable[[dict[str, str]], dict[str, str]],
) -> None:
    """Body of a forked measuring process: the job's streams, directory and environment,
    plus what the imports set, as a process that imported everything itself would have."""
    code = 1
    try:
        die_with_parent()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server's own handler is not its
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for target, fd in zip((1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in (null, *fds):
            os.close(fd)
        connection.close()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(with_imports(request["environment"]))
        logging.root.handlers.clear()
        code = main(request["payload"])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)


def serve(address: str, families: Collection[str] = ()) -> None:
    """Accept requests on the Unix socket `address` until stopped (SIGTERM), one process per
    request, pre-imported for `families` (none named: all); then remove the socket and its
    folder."""
    # Stopped (by `stop`, or by the death of the Snakemake that started it), it leaves no
    # folder behind; its processes die with it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        _serve(address, families)
    finally:
        shutil.rmtree(Path(address).parent, ignore_errors=True)


def _serve(address: str, families: Collection[str]) -> None:
    # The imports set variables of their own, which a job's process sets too when it imports.
    before = dict(os.environ)
    main, before_fork = _preload(families)
    environment = dict(os.environ)
    with_imports = functools.partial(
        after_imports, before=before, imported=set_by(before, environment)
    )
    # Ctrl-C reaches the jobs themselves; the server ends with the Snakemake that started it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}  # pid -> the connection of the job that asked
    print(f"fork server ready at {address}", flush=True)
    while True:
        # Idle, it sleeps until a request; while processes run, it checks on them 20 times a second.
        for key, _ in selector.select(timeout=0.05 if running else None):
            if key.fileobj is listener:
                connection, _ = listener.accept()
                request, fds = _receive(connection, with_fds=True)
                refused = _refusal(request, environment, with_imports)
                if refused:
                    for fd in fds:
                        os.close(fd)
                    _send(connection, {"refused": refused})
                    connection.close()
                    continue
                _ask_before_fork(before_fork, request)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other in running.values():
                        other.close()
                    _measure(main, connection, request, fds, with_imports)
                for fd in fds:
                    os.close(fd)
                _send(connection, {"pid": pid})
                running[pid] = connection
                selector.register(connection, selectors.EVENT_READ, pid)
            else:
                # The job's supervisor went away (cancelled): its process must not outlive it.
                os.kill(key.data, signal.SIGKILL)
        for pid, connection in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                selector.unregister(connection)
                # An OSError: the supervisor is gone, nobody waits for this status.
                with contextlib.suppress(OSError):
                    _send(connection, {"returncode": os.waitstatus_to_exitcode(status)})
                connection.close()
                del running[pid]


def _refusal(
    request: dict[str, Any] | None,
    environment: dict[str, str],
    with_imports: Callable[[dict[str, str]], dict[str, str]],
) -> str | None:
    """Why this server cannot start the requested process faithfully, or None."""
    if request is None:
        return "empty request"
    if request["executable"] != sys.executable:
        return f"the job runs {request['executable']}, this server {sys.executable}"
    differing = differing_variables(
        environment, with_imports(request["environment"]), imported=sys.modules
    )
    if differing:
        return f"the job's environment differs in {', '.join(differing)}"
    return None


# --- starting and stopping, from the Snakemake that runs the jobs ---------------------


_server: subprocess.Popen | None = None  # the server this process started, if any
_server_folder: str | None = None  # its socket's folder


def start(log_file: str | Path, families: Collection[str] = ()) -> None:
    """Start a server for this process's jobs, pre-imported for `families` (by name; none
    named: every registered family); the jobs find it through ADDRESS_VARIABLE."""
    global _server, _server_folder
    if _server is not None:
        raise RuntimeError(f"a fork server is already running (pid {_server.pid})")
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as output:
        folder = tempfile.mkdtemp(prefix="accelbench-fork-")
        address = os.path.join(folder, "socket")
        try:
            server = subprocess.Popen(
                [sys.executable, "-m", "accelbench.job.fork_server", address, *families],
                stdout=subprocess.PIPE,
                stderr=output,
                preexec_fn=lambda: die_with_parent(signal.SIGTERM),
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
    ready = server.stdout.readline()
    server.stdout.close()
    if not ready:
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"the fork server did not start; see {log_file}")
    os.environ[ADDRESS_VARIABLE] = address
    _server, _server_folder = server, folder


def stop() -> None:
    """Stop the server `start` started (if any); it removes its socket and folder."""
    global _server, _server_folder
    if _server is None:
        return
    os.environ.pop(ADDRESS_VARIABLE, None)
    _server.terminate()
    _server.wait()
    # A server killed before it could clean up (SIGKILL) leaves them to us.
    shutil.rmtree(_server_folder, ignore_errors=True)
    _server = _server_folder = None


# --- the client, in a job's supervisor ------------------------------------------------


class ServedProcess:
    """A measuring process forked by the server, waited on like a subprocess.Popen."""

    def __init__(self, connection: socket.socket, pid: int):
        self._connection = connection
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._connection.settimeout(timeout)
            try:
                reply, _ = _receive(self._connection)
            except TimeoutError:
                raise subprocess.TimeoutExpired("measuring process", timeout) from None
            self._connection.close()
            # No reply: the server died, and with it (PDEATHSIG) the process.
            self.returncode = reply["returncode"] if reply else -signal.SIGKILL
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def request(payload: dict[str, Any], stderr: int = 2) -> ServedProcess | None:
    """Have this run's server fork the measuring process for `payload`, writing to this
    process's stdout and to `stderr` (a descriptor); None if it cannot."""
    address = os.environ.get(ADDRESS_VARIABLE)
    if not address:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(address)
        sys.stdout.flush()
        sys.stderr.flush()
        # The process writes where a child of this one would: this process's stdout, `stderr`.
        message = {
            "payload": payload,
            "executable": sys.executable,
            "cwd": os.getcwd(),
            "environment": dict(os.environ),
        }
        _send(connection, message, fds=[1, stderr])
        reply, _ = _receive(connection)
    except OSError as err:
        connection.close()
        log.info("fork server at %s not reachable (%s): starting the process here", address, err)
        return None
    if not reply or "pid" not in reply:
        connection.close()
        why = (reply or {}).get("refused")
        log.info("fork server declined (%s): starting the process here", why)
        return None
    return ServedProcess(connection, reply["pid"])


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
