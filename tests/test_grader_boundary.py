"""A grader nobody can own: hostile submissions against the grader around the box (issue 23).

A class of honest and hostile submissions of two exercises (tests/data/integrity: secret_sum,
whose hidden argument sets catch a printed answer, and secret_image, whose picture the grader
reads back out of the box) is graded as root at both sandbox levels -- bubblewrap's namespaces,
and a fresh uid per box with bubblewrap hidden -- twice each on one cache, after a second local
user has made every shared name the grader could use. Then:
- no code of theirs ran outside a box (each payload leaves /tmp/h-pwned-root-NAME if it ever
  runs as root; the second user's planted tools leave /tmp/h-pwned-mallory if run);
- no cheat passes, every honest submission keeps its verdict;
- a payload that manages to read what it must not (a solution, a classmate, the grader's cache)
  exits with code 7: no row may say "exit code 7";
- no file outside the grader's folders is created, changed or chowned (a tripwire lists and
  hashes them before and after: the class, a victim folder, the course, the second user's
  files, the cache's tools, /etc/shadow);
- the report is whole and parses.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PYTHONPATH, ROOT
from idrrun.run import boundary, isolation, sandbox

INTEGRITY = ROOT / "tests" / "data" / "integrity"
MALLORY = "idrrun-mallory"
EXIT_LEAKED = 7  # a payload that read what it must not says so with this exit code

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the uid level and a second local user need root"),
    pytest.mark.skipif(isolation.sandbox_support().level != "namespaces",
                       reason="this machine cannot make namespaces (bubblewrap)"),
]

HEAD = """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <glob.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
static void canary(const char *who)
{
    if (geteuid() == 0) {  /* only ever true outside a box */
        char p[256];
        snprintf(p, sizeof p, "/tmp/h-pwned-root-%s", who);
        FILE *f = fopen(p, "w");
        if (f) fclose(f);
    }
}
static int readable(const char *pattern, const char *needle)
{
    glob_t g;
    int found = 0;
    if (glob(pattern, 0, NULL, &g) != 0) return 0;
    for (size_t k = 0; k < g.gl_pathc && !found; k++) {
        FILE *f = fopen(g.gl_pathv[k], "r");
        char buf[8192] = {0};
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        found = needle == NULL || strstr(buf, needle) != NULL;
        fclose(f);
    }
    globfree(&g);
    return found;
}
"""


# What every payload computes, as the solution does (its directives and data clauses): only the
# value it prints, the public one, is a cheat (the hidden argument sets catch it).
SUM = """    long n = argc > 1 ? atol(argv[1]) : 1000;
    double sum = 0.0;
    double *w = malloc(13 * sizeof(double));
    for (int k = 0; k < 13; k++)
        w[k] = 1.0 / (1.0 + k);
    #pragma acc parallel loop reduction(+:sum) copyin(w[0:13])
    for (long i = 0; i < n; i++)
        sum += (double)((i * i) % 7) * w[i % 13];
    free(w);
"""


def _main(name: str, body: str, value: str, head: str = "") -> str:
    return (HEAD + head + "int main(int argc, char **argv)\n{\n" + f'    canary("{name}");\n' + SUM +
            body + f'    printf("sum = {value}\\n");\n    return 0;\n}}\n')


def public_value(solution: Path, tmp: Path) -> str:
    exe = tmp / "secret-sum"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(solution)], check=True)
    out = subprocess.run([str(exe), "100000"], capture_output=True, text=True, check=True).stdout
    return out.split("=")[1].strip()


def sum_class(folder: Path, course: Path, cache: Path, victim: Path, tmp: Path,
              shared: Path, elsewhere: tuple[Path, ...] = ()) -> dict[str, str]:
    """secret_sum's class: student -> what it tries. Honest ones start with good_/wrong_.
    shared: the grader's temporary folder (its TMPDIR, as open as /tmp); elsewhere: other
    copies of the course a box must not read either."""
    solution_path = course / "C" / "secret_sum_solution.c"
    sol = solution_path.read_text()
    value = public_value(solution_path, tmp)
    S = str(solution_path)
    grading = f"{shared}/idrrun-grading-*"
    subs: dict[str, tuple[str, str]] = {
        "good_alice.c": (sol, "correct"),
        "good_bob.c": (sol.replace("double sum = 0.0;", "double sum = 0.0;  /* mine */"), "correct"),
        "wrong_carol.c": (sol.replace("i < n; i++", "i <= n; i++"), "an off-by-one"),
        # A: what the grader copies, chowns or reads by name
        "a01_replace_exe.c": (_main("a01", f"""
    glob_t g;
    unlink(argv[0]);
    if (glob("{cache}/guard/*", 0, NULL, &g) == 0 && g.gl_pathc) {{
        if (symlink(g.gl_pathv[0], argv[0])) {{}}
        if (symlink(g.gl_pathv[0], ".idrrun-prog")) {{}}
        if (symlink(g.gl_pathv[0], "prog")) {{}}
    }}
    if (glob("{grading}/*/*/tools/*", 0, NULL, &g) == 0)
        for (size_t k = 0; k < g.gl_pathc; k++) if (symlink(g.gl_pathv[k], "tool")) {{}}
""", value), "replace its executable by a link to the grader's guard (root ran it before)"),
        "a02_plant_links.c": (_main("a02", """
    const char *names[] = {"prog", ".idrrun-prog", ".idrrun-tmp", "source.c", "idrrun-deps.d",
        "prog-source.c.005t.original", "prog-source.c.006t.gimple", "prog-source.i", "prog.o",
        "build.json", "picture.pgm", NULL};
    for (int k = 0; names[k]; k++) { unlink(names[k]); if (symlink("/etc/shadow", names[k])) {} }
""", value), "links to /etc/shadow under every name the grader ever used"),
        "a04_tmp_swap.c": (_main("a04", f"""
    if (rename(".tmp", ".tmp-old")) {{}}
    if (symlink("{victim}", ".tmp")) {{}}
    if (symlink("{victim}", ".idrrun-tmp")) {{}}
    if (symlink("{victim}/file", "stolen")) {{}}
""", value), "its temporary folder swapped for a link to a root-owned folder"),
        # B: the grader's own files
        "b01_snoop_rooms.c": (_main("b01", f"""
    if (readable("{grading}/*/*/src/*", NULL) || readable("{grading}/*/*/builds/*/prog", NULL) ||
        readable("{grading}/*/*/run-*/*", NULL)) return {EXIT_LEAKED};
""", value), "list and read other rooms of the grader"),
        "b02_read_cache.c": (_main("b02", f"""
    if (readable("{cache}/solutions/*", NULL) || readable("{cache}/private/*", NULL) ||
        readable("/root/.cache/idrrun/*/*", NULL)) return {EXIT_LEAKED};
""", value), "read the cached solution outputs and the grader's key"),
        "b03_write_tools.c": (_main("b03", f"""
    glob_t g;
    const char *pats[] = {{"{cache}/guard/*", "{cache}/tracer/*", "{grading}/*/*/tools/*",
                           "{shared}/idrrun-share-*/*", NULL}};
    struct stat st;
    for (int p = 0; pats[p]; p++) if (glob(pats[p], 0, NULL, &g) == 0)
        for (size_t k = 0; k < g.gl_pathc; k++) {{
            /* the grader's (root's): the second user's own are open to all on purpose */
            if (lstat(g.gl_pathv[k], &st) != 0 || st.st_uid != 0) continue;
            int fd = open(g.gl_pathv[k], O_WRONLY | O_TRUNC);
            if (fd >= 0) {{ if (write(fd, "#!/bin/sh\\n", 10)) {{}} close(fd); return {EXIT_LEAKED}; }}
        }}
""", value), "overwrite the grader's tools"),
        # C: the solution, from inside the box
        "c01_define_include.c": (f'#define S "{S}"\n#include S\n', "#include of a macro naming the solution"),
        "c02_digraph.c": (f'%:include "{S}"\n', "the %: digraph"),
        "c03_comment_hash.c": (f'#/**/include "{S}"\n', "a comment between # and include"),
        "c04_backslash.c": (f'#incl\\\nude "{S}"\n', "a backslash-newline inside the word"),
        "c05_include_next.c": (f'#include_next "{S}"\n', "#include_next"),
        "c06_incbin.c": (_main("c06", f"""
    if (strstr(leaked, "reduction")) return {EXIT_LEAKED};
""", value, head=f'__asm__(".section .rodata\\n.global leaked\\nleaked:\\n.incbin \\"{S}\\"\\n'
                      '.byte 0\\n.previous\\n");\nextern const char leaked[];\n'),
                          ".incbin of the solution in inline assembly"),
        "c07_runtime_read.c": (_main("c07", f"""
    if (readable("{S}", "reduction") ||
        {" || ".join(f'readable("{p}/C/*solution*", "reduction")' for p in elsewhere) or "0"} ||
        readable("{ROOT}/idrrun/course/examples/C/*solution*", "reduction"))
        return {EXIT_LEAKED};
""", value), "read the solution (and idrrun's own course) while it runs"),
        "c08_solution_binary.c": (_main("c08", f"""
    glob_t g;
    if (glob("{grading}/*/idrrun-solution-*/builds/*/prog", 0, NULL, &g) == 0 && g.gl_pathc)
        return {EXIT_LEAKED};
""", value), "find the solution's build and run it"),
        "c09_classmates.c": (_main("c09", f"""
    DIR *d = opendir("/proc"); struct dirent *e; char p[512];
    while (d && (e = readdir(d))) {{
        snprintf(p, sizeof p, "/proc/%s/cwd/good_alice.c", e->d_name);
        if (readable(p, "reduction")) return {EXIT_LEAKED};
    }}
    if (readable("{folder}/*.c", "reduction")) return {EXIT_LEAKED};
""", value), "read a classmate's submission"),
        "c10_environment.c": (_main("c10", f"""
    const char *names[] = {{"IDRRUN_EXAMPLES", "XDG_CACHE_HOME", "IDRRUN_CACHE_DIR", "PYTHONPATH", NULL}};
    for (int k = 0; names[k]; k++) if (getenv(names[k])) return {EXIT_LEAKED};
""", value), "the grader's environment"),
        # D: checks fooled by code that never runs
        "d01_dead_static.c": (sol.replace("    #pragma acc parallel loop reduction(+:sum) copyin(w[0:13])\n", "").replace("int main(", """static double unused(double *w, long n)
{
    double sum = 0.0;
    #pragma acc parallel loop reduction(+:sum) copyin(w[0:13])
    for (long i = 0; i < n; i++)
        sum += w[i % 13];
    return sum;
}

int main("""), "the serial program, the directives in a function never called"),
        "d02_fnptr_return.c": (sol.replace("int main(", """static void noop(void) {}
void (*summed(double *w, long n, double *out))(void)
{
    double sum = 0.0;
    #pragma acc parallel loop reduction(+:sum)
    for (long i = 0; i < n; i++)
        sum += (double)((i * i) % 7) * w[i % 13];
    *out = sum;
    return noop;
}

int main(""").replace("""    #pragma acc parallel loop reduction(+:sum) copyin(w[0:13])
    for (long i = 0; i < n; i++)
        sum += (double)((i * i) % 7) * w[i % 13];""", "    summed(w, n, &sum);"),
                               "no data clause, in a function whose return type is a function pointer"),
    }
    folder.mkdir()
    tries = {}
    for name, (text, what) in subs.items():
        (folder / name).write_text(text)
        tries[Path(name).stem] = what
    # A folder whose links name what the grader once wrote through, and a data file's name.
    a03 = folder / "a03_folder_links"
    (a03 / "sub").mkdir(parents=True)
    (a03 / "main.c").write_text(_main("a03", "", value))
    (a03 / "prog").symlink_to(cache / "guard")
    (a03 / ".idrrun-prog").symlink_to("/tmp/h-pwned-a03-prog")
    (a03 / "data.txt").symlink_to("/tmp/h-pwned-a03-data")
    (a03 / "etc").symlink_to("/etc")
    tries["a03_folder_links"] = "links in the folder handed in (dangling ones, to the guard, to /etc)"
    # E: one submission that would stop the class
    e01 = folder / "e01_sparse"
    e01.mkdir()
    (e01 / "main.c").write_text(sol)
    with open(e01 / "data.bin", "wb") as fh:
        fh.seek(4 << 30)
        fh.write(b"x")
    tries["e01_sparse"] = "an 8 KB folder holding a 4 GB sparse file"
    e02 = folder / "e02_deep"
    e02.mkdir()
    (e02 / "main.c").write_text(sol)
    fd = os.open(e02, os.O_RDONLY)
    for _ in range(1100):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    tries["e02_deep"] = "a folder 1100 levels deep"
    return tries


def image_class(folder: Path, course: Path, outside: Path) -> dict[str, str]:
    """secret_image's class: the picture the grader reads back is the attack."""
    sol = (course / "C" / "secret_image_solution.c").read_text()
    end = '    printf("picture written'

    def then(code: str) -> str:
        return sol.replace(end, code + end)

    subs = {
        "good_dan.c": (sol, "correct"),
        "wrong_eve.c": (sol.replace("% 256", "% 255"), "a wrong picture"),
        "i01_link_shadow.c": (then('    unlink("picture.pgm"); if (symlink("/etc/shadow", "picture.pgm")) {}\n'),
                              "its picture a link to /etc/shadow"),
        "i02_link_big.c": (then(f'    unlink("picture.pgm"); if (symlink("{outside}", "picture.pgm")) {{}}\n'),
                           "its picture a link to a 6 GB file"),
        "i03_fifo.c": (then('    unlink("picture.pgm"); mkfifo("picture.pgm", 0644);\n'),
                       "its picture a FIFO (a reader would wait forever)"),
        "i04_hardlink.c": (then('    unlink("picture.pgm"); if (link("/etc/shadow", "picture.pgm")) {}\n'
                                '    if (link("/etc/passwd", "picture.pgm")) {}\n'),
                           "its picture a hard link to a file it cannot read"),
        "i05_sparse_huge.c": (then('    FILE *g = fopen("picture.pgm", "w"); fseek(g, 900L << 20, SEEK_SET);'
                                   ' fputc(1, g); fclose(g);\n'), "a 900 MB sparse picture"),
    }
    folder.mkdir()
    for name, (text, _) in subs.items():
        (folder / name).write_text(("#include <unistd.h>\n#include <sys/stat.h>\n" + text))
    return {Path(n).stem: what for n, (_, what) in subs.items()}


# --- the tripwire ---------------------------------------------------------------------------

def _state(paths: list[Path]) -> dict[str, tuple[object, ...]]:
    """Every file and folder under `paths` (links not followed): owner, mode, content hash."""
    out: dict[str, tuple[object, ...]] = {}
    for top in paths:
        stack = [top]
        while stack:
            p = stack.pop()
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if os.path.islink(p):
                out[str(p)] = (st.st_uid, st.st_gid, "link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = (st.st_uid, st.st_gid, oct(st.st_mode), "dir")
                if len(p.parts) - len(top.parts) < 40:
                    stack += sorted(p.iterdir())
            else:
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if st.st_size < 1 << 24 else \
                    f"{st.st_size} bytes"
                out[str(p)] = (st.st_uid, st.st_gid, oct(st.st_mode), digest)
    return out


def _pwned() -> list[str]:
    found = []
    for tmp in ("/tmp", "/var/tmp", "/dev/shm"):
        found += [str(p) for p in Path(tmp).glob("h-pwned*")]
    return found


def _box_litter() -> list[str]:
    """Entries of the shared temporary folders owned by a box's uid."""
    found = []
    for tmp in ("/tmp", "/var/tmp", "/dev/shm"):
        for entry in os.scandir(tmp):
            try:
                if entry.stat(follow_symlinks=False).st_uid >= sandbox.UID_BASE:
                    found.append(entry.path)
            except OSError:
                continue
    return found


# --- the second local user ------------------------------------------------------------------

def _mallory() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam(MALLORY)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        MALLORY], check=True)
        pw = pwd.getpwnam(MALLORY)
    return pw.pw_uid, pw.pw_gid


MALLORY_SCRIPT = r"""
set -e
umask 000
cd "$1"
for d in idrrun-grading-0 idrrun-share-0 idrrun-0; do mkdir -p "$d" && chmod 777 "$d"; done
# a guard, a tracer and tools under every name the grader used or might guess
for d in idrrun-share-0 idrrun-grading-0 idrrun-grading-0/tools; do
  mkdir -p "$d"
  for n in idrrun-guard idrrun-tracer.so prog; do
    printf '#!/bin/sh\ntouch /tmp/h-pwned-mallory\nexit 0\n' > "$d/$n"
    chmod 777 "$d/$n"
  done
done
# the folders of the next pids, and solution folders
for p in $(seq $(( $2 )) $(( $2 + 200 ))); do mkdir -p idrrun-grading-0/$p/tools; done
mkdir -p idrrun-solution-$2-x idrrun-grade-x
"""


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """The grader's temporary folder (its TMPDIR): open to every user, sticky, as /tmp is, and
    the test's own, so that no other program's files get in the way."""
    folder = Path(f"/tmp/h-shared-{os.getpid()}")
    folder.mkdir()
    os.chmod(folder, 0o1777)
    yield folder
    boundary.remove(folder)


@pytest.fixture(scope="module")
def mallory(shared: Path) -> list[Path]:
    """A second local user who made every shared name first."""
    uid, gid = _mallory()
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--",
                    "sh", "-c", MALLORY_SCRIPT, "mallory", str(shared), str(os.getpid())], check=True)
    planted = sorted(shared.iterdir())
    assert planted and all(os.lstat(p).st_uid == uid for p in planted)
    return planted


# --- grading ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def no_bwrap() -> Iterator[str]:
    """A PATH with everything of /usr/bin and /usr/sbin but bubblewrap: the "uid" level. Open to
    every user: a box's uid runs the compiler through it."""
    folder = Path(f"/tmp/h-no-bwrap-{os.getpid()}")
    folder.mkdir()
    os.chmod(folder, 0o755)
    for d in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
        for entry in os.scandir(d):
            if entry.name != "bwrap" and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry.path)
    yield str(folder)
    shutil.rmtree(folder)


def grade(exercise: str, subs: list[Path], course: Path, cache: Path, report: Path, cwd: Path,
          shared: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, IDRRUN_EXAMPLES=str(course),
               XDG_CACHE_HOME=str(cache.parent), IDRRUN_RESIDENT="0", TMPDIR=str(shared))
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "idrrun.cli", "grade", exercise, "-j", "2",
                           "--timeout", "10", "--report", str(report), "--fresh", "--", *map(str, subs)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _rows(report: Path) -> dict[str, dict[str, str]]:
    return {row["student"]: row for row in csv.DictReader(report.open())}


@pytest.fixture(scope="module")
def opt_course() -> Iterator[Path]:
    """The course where the image puts it: under /opt, readable by everyone."""
    folder = Path(f"/opt/idrrun-test-course-{os.getpid()}")
    shutil.copytree(INTEGRITY, folder / "examples")
    os.chmod(folder, 0o755)
    yield folder / "examples"
    shutil.rmtree(folder)


@pytest.fixture
def deep_cleanup(tmp_path: Path) -> Iterator[None]:
    """The 1100-deep folder goes whatever happens (pytest's own clean-up recurses: it fails on it)."""
    yield
    boundary.remove(tmp_path / "sum" / "e02_deep")


@pytest.mark.parametrize("level", ["namespaces", "uid"])
def test_a_hostile_class_owns_nothing(tmp_path: Path, level: str, shared: Path, mallory: list[Path],
                                      opt_course: Path, no_bwrap: str, deep_cleanup: None) -> None:
    # The course where the image puts it (under /opt, readable by all) with namespaces; at the
    # uid level, where a box sees every readable file, a private copy (the grader refuses the
    # one under /opt there: checked below).
    if level == "namespaces":
        course = opt_course
        path = None
    else:
        course = tmp_path / "private-course"
        shutil.copytree(INTEGRITY, course)
        os.chmod(tmp_path, 0o700)
        path = no_bwrap
    cache = tmp_path / "xdg" / "idrrun"
    victim = Path(f"/tmp/h-victim-{os.getpid()}")
    victim.mkdir(exist_ok=True)
    (victim / "file").write_text("the victim's\n")
    big = tmp_path / "big-6g"
    with open(big, "wb") as fh:
        fh.seek(6 << 30)
        fh.write(b"x")
    # The checkout's own copy of the course, and the one under /opt, are readable by all: a box
    # at the uid level reads them (file permissions are all that level has: the grader refuses
    # to grade with such a course there, below); with namespaces it must not.
    tries = sum_class(tmp_path / "sum", course, cache, victim, tmp_path, shared,
                      (INTEGRITY, opt_course) if level == "namespaces" else ())
    tries_img = image_class(tmp_path / "img", course, big)
    sum_subs = sorted((tmp_path / "sum").iterdir())
    img_subs = sorted((tmp_path / "img").iterdir())
    watched = [tmp_path / "sum", tmp_path / "img", victim, course, *mallory, Path("/etc/shadow")]
    before = _state(watched)
    pwned_before, litter_before = _pwned(), _box_litter()
    tools_after_first: dict[str, tuple[object, ...]] = {}
    verdicts = []
    cheats: set[str] = set()  # (said after the other checks, so that one run shows them all)
    for session in (1, 2):
        r = grade("secret_sum", sum_subs, course, cache, tmp_path / "sum.csv", tmp_path, shared, path)
        ri = grade("secret_image", img_subs, course, cache, tmp_path / "img.csv", tmp_path, shared, path)
        assert "Traceback" not in r.stderr + ri.stderr, r.stderr + ri.stderr
        rows, irows = _rows(tmp_path / "sum.csv"), _rows(tmp_path / "img.csv")
        print(f"{level}, session {session}:")
        for student, row in sorted({**rows, **irows}.items()):
            print(f"  {student:22s} {row['verdict']:10s} {row['reasons'][:120]}")
        # The reports are whole, every row graded in the level's box, and they parse.
        assert set(rows) == set(tries) and set(irows) == set(tries_img)
        assert {row["sandbox"] for row in [*rows.values(), *irows.values()]} == {level}
        json.loads(json.dumps(rows))
        # Honest submissions keep their verdicts.
        assert rows["good_alice"]["verdict"] == "pass", rows["good_alice"]
        assert rows["good_bob"]["verdict"] == "pass", rows["good_bob"]
        assert rows["wrong_carol"]["verdict"] == "fail"
        assert irows["good_dan"]["verdict"] == "pass", irows["good_dan"]
        assert irows["wrong_eve"]["verdict"] == "fail"
        # No cheat passes; none read what it must not; nothing of the victim reached a report.
        for student, row in [*rows.items(), *irows.items()]:
            if student[0] in "abcdei" and student[1].isdigit():
                if row["verdict"] == "pass":
                    cheats.add(f"{student} ({tries.get(student) or tries_img.get(student)})")
                assert f"exit code {EXIT_LEAKED}" not in row["reasons"], f"{student} read a secret: {row}"
            assert "root:" not in row["reasons"] and "the victim" not in row["reasons"]
        for name in ("e01_sparse", "e02_deep"):
            assert rows[name]["verdict"] == "error" and "refused" in rows[name]["reasons"], rows[name]
        for name in ("i01_link_shadow", "i02_link_big", "i03_fifo", "i04_hardlink", "i05_sparse_huge"):
            assert irows[name]["verdict"] == "fail", irows[name]
        verdicts.append({s: row["verdict"] for s, row in [*rows.items(), *irows.items()]})
        # Nothing ran as root, nothing of the second user's ran, no litter of a box is left, and
        # the shared temporary folder holds the second user's names only (the grader made its
        # own folder elsewhere, and removed it).
        assert _pwned() == pwned_before == []
        assert sorted(shared.iterdir()) == mallory
        assert _box_litter() == litter_before
        tools = _state([cache / "guard", cache / "tracer"])
        if session == 1:
            tools_after_first = tools
        else:
            assert tools == tools_after_first  # the cache's tools, unchanged by the class
    assert verdicts[0] == verdicts[1]
    after = _state(watched)
    changed = {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
               if before.get(k) != after.get(k)}
    assert changed == {}, changed
    shutil.rmtree(victim)
    assert not cheats, f"cheats that passed: {sorted(cheats)}"


def test_the_uid_level_refuses_a_course_others_can_read(tmp_path: Path, opt_course: Path,
                                                        shared: Path, no_bwrap: str) -> None:
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann.c").write_text((INTEGRITY / "C" / "secret_sum_solution.c").read_text())
    os.chmod(tmp_path, 0o700)
    r = grade("secret_sum", [tmp_path / "class" / "ann.c"], opt_course, tmp_path / "xdg" / "idrrun",
              tmp_path / "r.csv", tmp_path, shared, no_bwrap)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "readable by them" in r.stderr and str(opt_course) in r.stderr
    assert not (tmp_path / "r.csv").exists()
