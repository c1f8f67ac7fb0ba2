"""The resident `idrrun run` (resident.py, server.py): a real server process, real calls
from real `python -m idrrun` processes; each test has its own socket folder (TMPDIR)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from conftest import PYTHONPATH

from idrrun import resident

PROGRAM = r"""#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
    FILE *data = fopen("data.txt", "r");
    char word[64] = "";
    if (data) { fscanf(data, "%63s", word); fclose(data); }
    mode_t mask = umask(0); umask(mask);
    FILE *runs = fopen("runs.log", "a");  /* how many times it ran */
    if (runs) { fputs("ran\n", runs); fclose(runs); }
    printf("greeting=%s data=%s umask=%03o\n", getenv("GREETING"), word, mask);
    fprintf(stderr, "to stderr\n");
    return argc > 1 ? atoi(argv[1]) : 0;
}
"""


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", resident.ENV_SWITCH)}
    (tmp_path / "sockets").mkdir(exist_ok=True)
    env.update(PYTHONPATH=PYTHONPATH, TMPDIR=str(tmp_path / "sockets"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), IDRRUN_RESIDENT_IDLE="60")
    env.update(extra)
    return env


def idrrun(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
           umask: int | None = None) -> subprocess.CompletedProcess[str]:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)
    return subprocess.run([sys.executable, "-m", "idrrun", "run", *args], cwd=tmp_path / "work",
                          env=env or env_for(tmp_path), capture_output=True,
                          text=True, timeout=120, preexec_fn=set_umask)


def folder(tmp_path: Path) -> Path:
    return tmp_path / "sockets" / f"idrrun-{os.getuid()}"


def logs(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in sorted(folder(tmp_path).glob("*.log")))


def wait_for_server(tmp_path: Path, count: int = 1) -> None:
    """Until `count` servers have their socket and have said so in their log (a server binds
    its socket, then writes "serving ... (pid N)": a loaded machine shows the one without the
    other for a moment)."""
    deadline = time.monotonic() + 60
    while len(list(folder(tmp_path).glob("*.sock"))) < count or \
            len(re.findall(r"serving .* \(pid \d+", logs(tmp_path))) < count:
        assert time.monotonic() < deadline, f"no server came up; its log: {logs(tmp_path)}"
        time.sleep(0.1)


@pytest.fixture
def warm(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A work folder with the program, and a server started by a first (in-process) call;
    every server left is stopped at the end."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "p.c").write_text(PROGRAM)
    (work / "data.txt").write_text("from-the-folder\n")
    for _ in range(2):  # the second call within BURST_SECONDS starts the server
        first = idrrun(tmp_path, "--notime", "p.c")
        assert first.returncode == 0, first.stderr
    wait_for_server(tmp_path)
    yield tmp_path
    for line in logs(tmp_path).splitlines():
        m = re.search(r"serving .* \(pid (\d+)", line)
        if m:
            try:
                os.kill(int(m.group(1)), signal.SIGTERM)
            except ProcessLookupError:
                pass



def test_the_caller_s_start_loads_no_module_python_itself_did_not() -> None:
    # resident.py: the caller's side must cost a millisecond or two; collections (~4 ms, from
    # errors.py's annotations), argparse, json, socket or subprocess would cost more than that.
    # Without site (-S): only what idrrun itself imports, whatever the venv's .pth files load.
    r = subprocess.run([sys.executable, "-S", "-c",
                        "import sys; from idrrun import cli, resident; print(' '.join(sorted(m for m in "
                        "('collections', 'argparse', 'typing', 'socket', 'json', 'subprocess', "
                        "'pathlib', 're') if m in sys.modules)))"],
                       env={**os.environ, "PYTHONPATH": PYTHONPATH}, cwd="/", capture_output=True,
                       text=True, timeout=60, check=True)
    assert r.stdout.split() == []

def test_a_served_call_sees_the_callers_streams_folder_environment_and_umask(warm: Path) -> None:
    env = env_for(warm, GREETING="bonjour")
    served = idrrun(warm, "--notime", "p.c", env=env, umask=0o027)
    local = idrrun(warm, "--notime", "p.c", umask=0o027, env={**env, resident.ENV_SWITCH: "0"})
    assert served.returncode == local.returncode == 0
    assert "greeting=bonjour data=from-the-folder umask=027\nto stderr\n" in served.stdout
    assert served.stdout == local.stdout
    # idrrun's own messages on the caller's stderr: a file given as --stdin that is not there
    served = idrrun(warm, "--stdin", "nothere.txt", "p.c", env=env)
    local = idrrun(warm, "--stdin", "nothere.txt", "p.c", env={**env, resident.ENV_SWITCH: "0"})
    assert served.returncode == local.returncode != 0
    assert served.stderr == local.stderr and "nothere.txt" in served.stderr
    assert logs(warm).count("worker ") == 2  # the served calls, not the local ones


def test_a_socket_folder_deeper_than_a_socket_address_holds_is_served(tmp_path: Path) -> None:
    """A socket's address holds 108 bytes: a long TMPDIR (a test runner's, a batch job's) still
    gets its server, reached through a descriptor of its folder."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    env = env_for(tmp_path, TMPDIR=str(deep))
    work = tmp_path / "work"
    work.mkdir()
    (work / "p.c").write_text(PROGRAM)
    (work / "data.txt").write_text("from-the-folder\n")
    sockets = deep / f"idrrun-{os.getuid()}"
    assert len(str(sockets / "0123456789abcdef.sock")) > resident.UNIX_PATH_MAX
    for _ in range(2):  # the second call within BURST_SECONDS starts the server
        assert idrrun(tmp_path, "--notime", "p.c", env=env).returncode == 0
    deadline = time.monotonic() + 60
    while not list(sockets.glob("*.sock")):
        assert time.monotonic() < deadline, "no server came up: " + "".join(
            p.read_text() for p in sockets.glob("*.log"))
        time.sleep(0.1)
    served = idrrun(tmp_path, "--notime", "p.c", env=env)
    log = "".join(p.read_text() for p in sockets.glob("*.log"))
    for line in log.splitlines():
        m = re.search(r"serving .* \(pid (\d+)", line)
        if m:
            os.kill(int(m.group(1)), signal.SIGTERM)
    assert served.returncode == 0 and "data=from-the-folder" in served.stdout
    assert log.count("worker ") == 1, log


@pytest.mark.parametrize("args, code, message", [
    (["--cliopts", "5", "p.c"], 3, "run failed: exit code 5"),
    (["broken.c"], 1, "compile failed: exit code 1"),
    (["--frobnicate", "p.c"], 2, "unrecognized arguments: --frobnicate"),
    (["missing.c"], 2, "no such file: missing.c"),
])
def test_exit_codes_and_messages_are_those_of_an_in_process_call(
        warm: Path, args: list[str], code: int, message: str) -> None:
    (warm / "work" / "broken.c").write_text("int main(void) { return 0 }\n")
    served = idrrun(warm, *args)
    local = idrrun(warm, *args, env=env_for(warm, **{resident.ENV_SWITCH: "0"}))
    assert served.returncode == local.returncode == code
    assert message in served.stderr and "Traceback" not in served.stderr
    assert served.stdout.replace("build cached, not recompiled (--force rebuilds)\n", "") \
        .split("exit")[0] == local.stdout.replace(
            "build cached, not recompiled (--force rebuilds)\n", "").split("exit")[0]
    assert logs(warm).count("worker ") == 1


SLEEPER = r"""#include <stdio.h>
#include <unistd.h>
int main(void) { printf("pid %d\n", (int)getpid()); fflush(stdout); sleep(60); return 0; }
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # (it may end between the two looks, or while its status is read: ESRCH)
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_ctrl_c_in_a_terminal_interrupts_the_served_run(warm: Path) -> None:
    (warm / "work" / "sleep.c").write_text(SLEEPER)
    child = pexpect.spawn(sys.executable, ["-m", "idrrun", "run", "sleep.c"], cwd=str(warm / "work"),
                          env=env_for(warm), encoding="utf-8", timeout=60)
    child.expect(r"pid (\d+)")
    program = int(child.match.group(1))
    assert alive(program)
    child.sendintr()
    child.expect("interrupted")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert not alive(program)
    assert "worker " in logs(warm)


def test_a_caller_killed_outright_takes_its_program_with_it(warm: Path) -> None:
    (warm / "work" / "sleep.c").write_text(SLEEPER)
    caller = subprocess.Popen([sys.executable, "-m", "idrrun", "run", "sleep.c"],
                              cwd=warm / "work", env=env_for(warm), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    assert caller.stdout is not None
    program = None
    for line in caller.stdout:
        m = re.match(r"pid (\d+)", line)
        if m:
            program = int(m.group(1))
            break
    assert program is not None and alive(program)
    caller.kill()
    caller.wait()
    deadline = time.monotonic() + 20
    while alive(program):
        assert time.monotonic() < deadline, "the program outlived its killed caller"
        time.sleep(0.1)


def test_a_caller_with_other_limits_gets_its_own_server(warm: Path) -> None:
    """RLIMIT_NOFILE cannot be handed over with the call: another key, another server."""
    def lower() -> None:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
    cmd = [sys.executable, "-m", "idrrun", "run", "--notime", "p.c"]
    for call in range(3):
        r = subprocess.run(cmd, cwd=warm / "work", env=env_for(warm), preexec_fn=lower,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        if call == 1:
            wait_for_server(warm, count=2)
    assert logs(warm).count("serving ") == 2
    assert logs(warm).count("worker ") == 1


def test_no_server_without_a_private_folder_or_when_switched_off(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "p.c").write_text(PROGRAM)
    folder(tmp_path).mkdir(parents=True)
    folder(tmp_path).chmod(0o777)  # others could put their own socket there
    for _ in range(2):
        r = idrrun(tmp_path, "p.c")
        assert r.returncode == 0, r.stderr
    r = idrrun(tmp_path, "p.c", env=env_for(tmp_path, TMPDIR=str(tmp_path / "off"),
                                            **{resident.ENV_SWITCH: "0"}))
    assert r.returncode == 0
    time.sleep(1)
    assert not list(folder(tmp_path).iterdir())
    assert not (tmp_path / "off").exists()


def test_an_idle_server_leaves_and_takes_its_socket(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "p.c").write_text(PROGRAM)
    env = env_for(tmp_path, **{resident.ENV_IDLE: "1"})
    for _ in range(2):
        assert idrrun(tmp_path, "p.c", env=env).returncode == 0
    wait_for_server(tmp_path)
    deadline = time.monotonic() + 60
    while list(folder(tmp_path).glob("*.sock")):
        assert time.monotonic() < deadline, logs(tmp_path)
        time.sleep(0.2)
    assert "no call for 1 s: leaving" in logs(tmp_path)


def test_the_key_follows_idrrun_s_own_files(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    before = resident.key(str(package))
    assert resident.key(str(package)) == before
    (package / "a.py").write_text("x = 22\n")
    assert resident.key(str(package)) != before


def test_idrrun_s_own_files_are_its_sources_in_every_folder_but_caches_and_the_course(
        tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for name in ("a.py", "run/guard.c", "run/deep/b.h", "__pycache__/a.cpython-311.pyc",
                 "run/__pycache__/c.py", "course/examples/x.py", "notes.txt"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(name)
    (package / "elsewhere").symlink_to(tmp_path)  # not followed: a link is not idrrun's folder
    assert [name for name, _, _ in resident.files_state(str(package))] == \
        ["a.py", "run/deep/b.h", "run/guard.c"]
    before = resident.key(str(package))
    (package / "run" / "deep" / "b.h").write_text("changed")
    assert resident.key(str(package)) != before


def doctor_line(tmp_path: Path, **extra: str) -> dict[str, str]:
    r = subprocess.run([sys.executable, "-m", "idrrun", "doctor", "--json"], cwd=tmp_path,
                       env=env_for(tmp_path, **extra), capture_output=True, text=True, timeout=120)
    lines = [line for line in json.loads(r.stdout)["lines"] if line["topic"] == "resident run"]
    assert len(lines) == 1, r.stdout
    return lines[0]


def test_doctor_says_whether_runs_are_resident(warm: Path) -> None:
    line = doctor_line(warm)
    assert line["status"] == "OK" and "a server for this environment is running" in line["detail"]
    (warm / "other").mkdir()
    line = doctor_line(warm, TMPDIR=str(warm / "other"))
    assert line["status"] == "OK" and "two `idrrun run` within two minutes start a server" in line["detail"]
    line = doctor_line(warm, **{resident.ENV_SWITCH: "0"})
    assert line["status"] == "info" and line["detail"].startswith("off")
    open_folder = warm / "open"
    (open_folder / f"idrrun-{os.getuid()}").mkdir(parents=True, mode=0o777)
    (open_folder / f"idrrun-{os.getuid()}").chmod(0o777)
    line = doctor_line(warm, TMPDIR=str(open_folder))
    assert line["status"] == "warning" and "not a folder only you can enter" in line["detail"]
    assert "XDG_RUNTIME_DIR" in line["fix"]


def test_files_written_in_a_folder_on_sys_path_do_not_change_the_key(tmp_path: Path) -> None:
    """A checkout on PYTHONPATH (written to by every run there) keeps its server; a package
    installed into site-packages does not."""
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    code = ("import sys; sys.path[1:1] = [sys.argv[1], sys.argv[2]]; "
            "from idrrun import resident; print(resident.key())")

    def key() -> str:
        return subprocess.run([sys.executable, "-c", code, str(tmp_path), str(site)],
                              env=env_for(tmp_path), capture_output=True, text=True,
                              check=True).stdout.strip()
    before = key()
    (tmp_path / "timeline.png").write_bytes(b"x")
    assert key() == before
    time.sleep(0.01)
    (site / "plugin-1.0.dist-info").mkdir()
    assert key() != before


def server_pids(tmp_path: Path) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"serving .* \(pid (\d+)", logs(tmp_path))]


def test_a_server_that_does_not_answer_leaves_the_call_to_run_in_process(warm: Path) -> None:
    """A stopped (or frozen) server: the caller waits START_SECONDS for its worker, then runs
    the call itself, once: the request the server finds later starts no second run."""
    (pid,) = server_pids(warm)
    runs = warm / "work" / "runs.log"
    runs.unlink()
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        r = idrrun(warm, "--notime", "p.c", env=env_for(warm, GREETING="late"))
        waited = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    assert r.returncode == 0, r.stderr
    assert "did not answer in 15 s: running in-process" in r.stderr
    assert r.stdout.count("greeting=late") == 1
    assert resident.START_SECONDS <= waited < resident.START_SECONDS + 30
    # The server, going on, finds the request and forks a worker, which finds its caller gone.
    deadline = time.monotonic() + 20
    while "BrokenPipeError" not in logs(warm):
        assert time.monotonic() < deadline, logs(warm)
        time.sleep(0.2)
    time.sleep(1)
    assert runs.read_text() == "ran\n"  # once: in-process


def test_a_server_log_past_1_mib_starts_again(warm: Path) -> None:
    (log,) = folder(warm).glob("*.log")
    (pid,) = server_pids(warm)
    with log.open("a") as f:
        f.write("old line\n" * 120_000)  # ~1.1 MB
    os.kill(pid, signal.SIGKILL)
    while alive(pid):
        time.sleep(0.05)
    assert idrrun(warm, "--notime", "p.c").returncode == 0  # in-process, starts a new server
    deadline = time.monotonic() + 60
    while "serving" not in log.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert log.stat().st_size < 10_000 and "old line" not in log.read_text()


def test_calls_from_one_python_process_each_get_their_own_worker_or_run_in_process(warm: Path) -> None:
    """cli.main called again in one process (a script, a benchmark): the second call must not
    take the first one's worker for its own (it waited 10 s and failed), and a caller whose
    sys.stdout is not its fd 1 (contextlib.redirect_stdout) runs in-process, its output where
    it redirected it."""
    script = (
        "import contextlib, io, signal, sys\n"
        "from idrrun import cli\n"
        "codes = [cli.main(['run', '--notime', 'p.c']) for _ in range(3)]\n"
        "buffer = io.StringIO()\n"
        "with contextlib.redirect_stdout(buffer):\n"
        "    codes.append(cli.main(['run', '--notime', 'p.c']))\n"
        "print('codes', codes, 'captured', 'greeting=' in buffer.getvalue(),\n"
        "      'sigint', signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=warm / "work", env=env_for(warm),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "codes [0, 0, 0, 0] captured True sigint True" in done.stdout, done.stdout + done.stderr
    assert time.monotonic() - start < 8, "a call waited for a worker that was not its own"
    assert logs(warm).count("worker ") == 3  # the redirected call ran in-process
    assert (warm / "work" / "runs.log").read_text().count("ran") == 6  # the fixture's two + 4


def test_a_lone_call_leaves_no_server_and_a_second_one_starts_it(tmp_path: Path) -> None:
    """A server is started by the second call within BURST_SECONDS: a test in a folder of its
    own, or a command typed once, leaves no process behind for 15 minutes."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "p.c").write_text(PROGRAM)
    assert idrrun(tmp_path, "p.c").returncode == 0
    time.sleep(2)
    assert not list(folder(tmp_path).glob("*.sock")) and not logs(tmp_path)
    (mark,) = folder(tmp_path).glob("*.last")
    old = time.time() - resident.BURST_SECONDS - 5
    os.utime(mark, (old, old))  # the first call long ago: still no server
    assert idrrun(tmp_path, "p.c").returncode == 0
    time.sleep(2)
    assert not list(folder(tmp_path).glob("*.sock"))
    assert idrrun(tmp_path, "p.c").returncode == 0  # within the burst
    wait_for_server(tmp_path)
    served = idrrun(tmp_path, "p.c")
    assert served.returncode == 0 and logs(tmp_path).count("worker ") == 1
    for pid in server_pids(tmp_path):
        os.kill(pid, signal.SIGTERM)


def test_a_python_without_pillow_still_gets_its_server(tmp_path: Path) -> None:
    """The server warms up --profile's pictures (Pillow, the fonts) before it forks; where that
    Python has no Pillow (an interpreter other than the one idrrun was installed for: the GPU
    machine's /usr/bin/python3), the warm-up is left out, said in its log, and the calls are
    still served (a server that died there left every call in-process: +0.4 s each)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "p.c").write_text(PROGRAM)
    (work / "data.txt").write_text("x\n")
    no_pillow = tmp_path / "no-pillow" / "PIL"
    no_pillow.mkdir(parents=True)
    (no_pillow / "__init__.py").write_text('raise ImportError("no Pillow for this Python")\n')
    env = env_for(tmp_path, PYTHONPATH=os.pathsep.join([str(no_pillow.parent), PYTHONPATH]))
    try:
        for _ in range(2):  # the second call within BURST_SECONDS starts the server
            first = idrrun(tmp_path, "--notime", "p.c", env=env)
            assert first.returncode == 0, first.stderr
        wait_for_server(tmp_path)
        assert "the pictures' warm-up left out (no Pillow for this Python)" in logs(tmp_path)
        served = idrrun(tmp_path, "--notime", "p.c", env=env)
        assert served.returncode == 0 and "greeting=" in served.stdout, served.stderr
        assert logs(tmp_path).count("worker ") == 1
    finally:
        for pid in server_pids(tmp_path):
            os.kill(pid, signal.SIGTERM)
