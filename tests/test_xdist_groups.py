"""The README's test command runs the tests on several workers (`-n auto --dist loadgroup`),
with the tests of a file on one worker and the files that change or watch the machine as a
whole (conftest.ONE_AT_A_TIME) one after the other on one. pytest-xdist does that from the
`xdist_group` markers conftest.py adds, only if they are there before xdist reads them, and
only with a pytest whose node ids xdist can extend (8: pytest 9 ignores xdist 3.8's change,
and every test goes anywhere). Checked on a scratch run of the same hook."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

from conftest import ONE_AT_A_TIME, ROOT

TESTS = ROOT / "tests"
SCRATCH_CONFTEST = f'''
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("idrrun_conftest", {str(TESTS / "conftest.py")!r})
ours = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ours)
pytest_collection_modifyitems = ours.pytest_collection_modifyitems
'''
SCRATCH_TEST = '''
import os, time, pytest
@pytest.mark.parametrize("i", range(4))
def test_x(i):
    time.sleep(0.3)
    print("RAN", __name__, os.environ.get("PYTEST_XDIST_WORKER"))
'''


def test_a_file_s_tests_share_a_worker_and_the_machine_s_files_share_one(tmp_path: Path) -> None:
    machine = ONE_AT_A_TIME[:2]
    files = (*machine, "test_plain_one.py", "test_plain_two.py")
    (tmp_path / "conftest.py").write_text(SCRATCH_CONFTEST)
    for name in files:
        (tmp_path / name).write_text(SCRATCH_TEST)
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-p",
                        "no:cacheprovider", "-q", "-rA"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    workers = collections.defaultdict(set)
    for module, worker in re.findall(r"^RAN (\S+) (gw\d+)", r.stdout, re.MULTILINE):
        workers[module].add(worker)
    assert set(workers) == {Path(name).stem for name in files}, r.stdout[-2000:]
    for module, seen in workers.items():
        assert len(seen) == 1, f"{module}'s tests ran on {sorted(seen)}"
    assert workers[Path(machine[0]).stem] == workers[Path(machine[1]).stem]
