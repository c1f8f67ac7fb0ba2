"""JupyterHub for the course: each student's server is a SLURM job (batchspawner) on a compute
node, running the course's environment (idrrun, JupyterLab, the compilers) as the student.

Settings from the environment, so that one file serves a cluster and the tests
(docs/teachers-day.md, "0. Once: the cluster and the hub"; tests/test_hub.py):
    IDRRUN_HUB_VENV      the course's environment on the nodes (default /opt/idrrun/venv): its
                         bin/jupyterhub-singleuser and bin/batchspawner-singleuser are run
    IDRRUN_HUB_STATE     the hub's database, cookie secret and logs (default /srv/idrrun/hub)
    IDRRUN_HUB_PORT      the port students open (default 8000); IDRRUN_HUB_INTERNAL_PORT the
                         hub's API for the servers (8081), IDRRUN_HUB_PROXY_PORT the proxy's (8001)
    IDRRUN_HUB_CONNECT_IP  the hub's address as the nodes reach it (default 127.0.0.1)
    IDRRUN_HUB_AUTH      pam (default: the cluster's accounts) or dummy (one shared password,
                         IDRRUN_HUB_PASSWORD: for tests and a classroom's first hour only)
    IDRRUN_HUB_USERS     comma-separated logins allowed in (default: any account PAM accepts)
    IDRRUN_HUB_ADMINS    comma-separated teachers' logins
    IDRRUN_HUB_SLURM     extra #SBATCH options, e.g. "--partition=gpu --gres=gpu:1 --time=4:00:00"
    IDRRUN_HUB_NODES     "n1=10.0.0.1,n2=10.0.0.2": node names to addresses where a node's name is
                         not its host name (the test cluster's nodes are slurmd -N on one machine)
    IDRRUN_HUB_START_TIMEOUT  seconds a server may take from its job's submission until it
                         answers (default 300: a queue's wait included)
    IDRRUN_HUB_SERVER_ARGS  more options of each student's JupyterLab, space-separated
    IDRRUN_HUB_BOARDS    the times boards' folder (default /srv/idrrun/boards): `idrrun grade
                         --board-page DIR` writes NAME.html there, and index.html that
                         lists them; logged-in users read them at /hub/boards/NAME and
                         /hub/boards/
    IDRRUN_HUB_API_TOKEN a token for a service "classroom" that may start servers and list users
                         (the teacher's scripts, the tests); absent: no such service
    IDRRUN_HUB_EXCHANGE  the class's exchange folder (default /srv/idrrun/exchange), on the hub's
                         machine only: its receiver (`idrrun classroom serve`) runs as the hub's
                         service "idrrun-exchange" (root, like the hub), and every server gets
                         IDRRUN_EXCHANGE_URL, so that `idrrun classroom fetch|submit|feedback`
                         reach it with the student's own hub token
    IDRRUN_HUB_EXCHANGE_PORT  the receiver's port, on every interface (default 8082)

The proxy is the one hub/install.sh put beside this JupyterHub (PREFIX/bin), else PATH's. A
student's terminals are login shells, whose /etc/profile resets PATH: /etc/profile.d/idrrun-hub.sh
(hub/install.sh; on every node) puts the environment first again (IDRRUN_HUB_BIN, given to every
server). A server whose job ends before it listens fails at once: her page and the hub's log
say so with the last lines of the job's log (~/.idrrun-hub-JOB.log).
"""

import asyncio
import html
import os
import shutil
import stat
import sys

from batchspawner import JobStatus, MultiSlurmSpawner
from jupyterhub.handlers import BaseHandler
from tornado import web

c = get_config()  # noqa: F821 (JupyterHub's config loader defines it)

venv = os.environ.get("IDRRUN_HUB_VENV", "/opt/idrrun/venv")
state = os.environ.get("IDRRUN_HUB_STATE", "/srv/idrrun/hub")
os.makedirs(state, mode=0o700, exist_ok=True)

c.JupyterHub.bind_url = f"http://:{os.environ.get('IDRRUN_HUB_PORT', '8000')}"
# The servers on the nodes call the hub's API back: it listens on every interface.
c.JupyterHub.hub_ip = "0.0.0.0"
c.JupyterHub.hub_connect_ip = os.environ.get("IDRRUN_HUB_CONNECT_IP", "127.0.0.1")
c.JupyterHub.hub_port = int(os.environ.get("IDRRUN_HUB_INTERNAL_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('IDRRUN_HUB_PROXY_PORT', '8001')}"
c.JupyterHub.db_url = f"sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{state}/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = f"{state}/jupyterhub-proxy.pid"
# The proxy hub/install.sh put beside this JupyterHub, which the start command need not have on
# PATH (JupyterHub would then advise `npm install -g`); else the one on PATH.
proxy = os.path.join(sys.prefix, "bin", "configurable-http-proxy")
if os.access(proxy, os.X_OK):
    c.ConfigurableHTTPProxy.command = [proxy]

if os.environ.get("IDRRUN_HUB_AUTH", "pam") == "dummy":
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = os.environ["IDRRUN_HUB_PASSWORD"]
else:
    c.JupyterHub.authenticator_class = "pam"
users = {u for u in os.environ.get("IDRRUN_HUB_USERS", "").split(",") if u}
admins = {u for u in os.environ.get("IDRRUN_HUB_ADMINS", "").split(",") if u}
if users:
    c.Authenticator.allowed_users = users
else:
    c.Authenticator.allow_all = True
c.Authenticator.admin_users = admins

# The hub runs as root: sbatch, squeue and scancel run as the student (her job, her files).
# runuser rather than batchspawner's default sudo: nothing to configure in sudoers.
# (By its full path: the commands run with the servers' PATH, which has no sbin.)
runuser = shutil.which("runuser") or "/usr/sbin/runuser"
# The job's log, in her home (the job's script below writes it; %j: the job's number).
JOB_LOG = ".idrrun-hub-%j.log"
JOB_POLL_S = 2.0
LOG_TAIL_LINES, LOG_TAIL_BYTES, LOG_READ_S = 12, 4096, 10.0
JOB_DIED = ("Your server's job {job} ended before your server started. "
            "The last lines of its log, {log}:")


class JobDied(RuntimeError):
    """A server's job that left the queue before its server listened; its text (her spawn
    page's message, the hub's log) ends with the job log's last lines."""

    def __init__(self, job: str, log: str, tail: str) -> None:
        head = JOB_DIED.format(job=job, log=log)
        super().__init__(f"{head}\n{tail}")
        self.jupyterhub_message = f"{head}\n{tail}"
        self.jupyterhub_html_message = f"{html.escape(head)}<pre>{html.escape(tail)}</pre>"


class CourseSpawner(MultiSlurmSpawner):
    """batchspawner's SLURM spawner (node names mapped to addresses where IDRRUN_HUB_NODES
    says), whose start fails as soon as the job is gone from the queue before her server
    listens: batchspawner would wait for the server's port, then JupyterHub for its answer, to
    start_timeout, under "Cluster job running... waiting to connect"."""

    submitted = ""

    async def submit_batch_script(self) -> str:
        self.submitted = await super().submit_batch_script()
        return self.submitted

    async def start(self) -> tuple[str, int]:
        starting = asyncio.ensure_future(self.start_until_listening())
        try:
            while not starting.done():
                await asyncio.wait([starting], timeout=JOB_POLL_S)
                if not starting.done() and await self.job_gone():
                    raise await self.job_died()
        finally:
            starting.cancel()
        failure = starting.exception()
        if failure is not None and await self.job_gone():
            # (batchspawner's own "has disappeared": the same, told with the log)
            raise await self.job_died() from failure
        return starting.result()

    async def start_until_listening(self) -> tuple[str, int]:
        ip, port = await super().start()
        while not await listening(ip, port):
            await asyncio.sleep(0.5)
        return ip, port

    async def job_gone(self) -> bool:
        return bool(self.submitted) and await self.query_job_status() == JobStatus.NOTFOUND

    async def job_died(self) -> JobDied:
        job, self.submitted = self.submitted, ""
        self.clear_state()  # nothing left to cancel
        log = os.path.join(self.req_homedir, JOB_LOG.replace("%j", job))
        return JobDied(job, log, await self.log_tail(log))

    async def log_tail(self, log: str) -> str:
        """The log's last lines, read as her: her home is hers, and so is what a name in it
        points to."""
        argv = [runuser, "-u", self.user.name, "--", "tail", "-c", str(LOG_TAIL_BYTES), log]
        self.log.info("reading the last lines of %s's job log: %s", self.user.name, argv)
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), LOG_READ_S)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return f"(not read in {LOG_READ_S:.0f} s)"
        if proc.returncode:
            return f"(not read: {err.decode(errors='replace').strip()})"
        lines = out.decode(errors="replace").splitlines()
        if len(out) == LOG_TAIL_BYTES:
            lines = lines[1:]  # (the first, cut)
        return "\n".join(lines[-LOG_TAIL_LINES:])


async def listening(ip: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), 5)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


nodes = dict(pair.split("=", 1) for pair in os.environ.get("IDRRUN_HUB_NODES", "").split(",") if pair)
c.JupyterHub.spawner_class = CourseSpawner
c.CourseSpawner.daemon_resolver = nodes
c.BatchSpawnerBase.exec_prefix = runuser + " -u {username} --"
c.BatchSpawnerBase.batchspawner_singleuser_cmd = f"{venv}/bin/batchspawner-singleuser"
c.Spawner.cmd = [f"{venv}/bin/jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.args = os.environ.get("IDRRUN_HUB_SERVER_ARGS", "").split()
c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL", "SLURM_CONF", "IDRRUN_CONFIG", "IDRRUN_EXAMPLES"]
c.Spawner.environment = {"PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin",
                         # (for her terminals, login shells whose /etc/profile resets PATH:
                         # /etc/profile.d/idrrun-hub.sh puts it first again)
                         "IDRRUN_HUB_BIN": f"{venv}/bin"}
# A job waits in the queue when the nodes are full: the student sees "pending" until it runs.
c.Spawner.start_timeout = int(os.environ.get("IDRRUN_HUB_START_TIMEOUT", "300"))
c.Spawner.http_timeout = 120
c.BatchSpawnerBase.req_options = os.environ.get("IDRRUN_HUB_SLURM", "")
# The job's own script: batchspawner's, without --get-user-env (only root's sbatch may use it,
# and sbatch runs as the student), and the job's log in her home.
c.SlurmSpawner.batch_script = """#!/bin/bash
#SBATCH --output={{homedir}}/""" + JOB_LOG + """
#SBATCH --job-name=idrrun-hub
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}}
{% if options %}#SBATCH {{options}}
{% endif %}
set -euo pipefail
trap 'echo SIGTERM received' TERM
{{prologue}}
{% if srun %}{{srun}} {% endif %}{{cmd}}
{{epilogue}}
"""

# The exchange's receiver: a process of the hub's (root) that takes each submission as bytes
# from the student's server and keeps it where only root writes (grading/receiver.py). The
# nodes reach it as they reach the hub's API; the proxy also routes /services/idrrun-exchange/.
exchange_port = int(os.environ.get("IDRRUN_HUB_EXCHANGE_PORT", "8082"))
exchange_url = f"http://{c.JupyterHub.hub_connect_ip}:{exchange_port}"
c.JupyterHub.services = [{
    "name": "idrrun-exchange", "url": exchange_url,
    "command": [f"{venv}/bin/idrrun", "classroom", "serve", "--exchange",
                os.environ.get("IDRRUN_HUB_EXCHANGE", "/srv/idrrun/exchange"),
                "--listen", f"0.0.0.0:{exchange_port}"],
}]
c.Spawner.environment["IDRRUN_EXCHANGE_URL"] = exchange_url

token = os.environ.get("IDRRUN_HUB_API_TOKEN")
if token:
    c.JupyterHub.services.append({"name": "classroom", "api_token": token})
    c.JupyterHub.load_roles = [{
        "name": "classroom", "services": ["classroom"],
        "scopes": ["admin:users", "admin:servers", "access:servers", "list:users"],
    }]


boards = os.environ.get("IDRRUN_HUB_BOARDS", "/srv/idrrun/boards")
# What a board page may hold: its own text and inline style, nothing it could load or run.
BOARD_POLICY = "default-src 'none'; style-src 'unsafe-inline'"
BOARD_CAP = 4 << 20


class BoardHandler(BaseHandler):
    """A class's times board (idrrun grade --board-page), to logged-in users: BOARDS/NAME.html
    at /hub/boards/NAME (or NAME.html: the index's links), the boards' index.html at
    /hub/boards/; opened without following a link, a regular file only, read with a cap."""

    @web.authenticated
    def get(self, name: str) -> None:
        name = name.removesuffix(".html") or "index"
        try:
            fd = os.open(os.path.join(boards, name + ".html"),
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            raise web.HTTPError(404) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise web.HTTPError(404)
            data = os.read(fd, BOARD_CAP)
        finally:
            os.close(fd)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Content-Security-Policy", BOARD_POLICY)
        self.finish(data)


# (JupyterHub calls extra_handlers deprecated in favour of services: a service would be a
# process and a port of its own for one static page.)
c.JupyterHub.extra_handlers = [(r"/boards/((?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,99})?)", BoardHandler)]
# The boards reached from the hub's home page (JupyterHub draws a home announcement as HTML; the
# boards link back to it).
c.JupyterHub.template_vars = {
    "announcement_home": '<a id="idrrun-boards" href="boards/">The class\'s times boards</a>'}
