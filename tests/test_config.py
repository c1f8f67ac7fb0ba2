"""Config layers and their precedence; broken files name the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from idrrun.request import config
from idrrun.errors import ConfigError


def test_precedence_user_project_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = Path(config.user_config_path())
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('timeout = 10\nlanguage = "fortran"\nfamily = "pgi"\n')
    (tmp_path / "idrrun.toml").write_text('timeout = 20\nfamily = "gcc"\n')
    env_file = tmp_path / "env.toml"
    env_file.write_text("timeout = 30\n")
    s = config.load(tmp_path, environ={})
    try:
        assert (s.values["timeout"], s.language, s.family) == (20, "fortran", "gcc")
        s = config.load(tmp_path, environ={"IDRRUN_CONFIG": str(env_file)})
        assert s.values["timeout"] == 30
        s = config.load(tmp_path, environ={"IDRRUN_CONFIG": str(env_file), "IDRRUN_TIMEOUT": "40"})
        assert s.values["timeout"] == 40
        assert s.files == (str(user), str(tmp_path / "idrrun.toml"), str(env_file))
    finally:
        user.unlink()


def test_defaults(tmp_path: Path) -> None:
    s = config.load(tmp_path, environ={})
    # Nothing set: the request's own defaults apply (model.RunRequest), see test_resolve.
    assert s.values == {} and s.family is None and s.launcher.kind == "none"


@pytest.mark.parametrize("text, message", [
    ("timeout = 'soon'", "field 'timeout': expected a number of seconds"),
    ("family = 'intel'", "field 'family': expected one of nvhpc, gcc, pgi"),
    ("tiemout = 3", "field 'tiemout': unknown field"),
    ("[compilers.gcc]\nc = 3", "field 'compilers.gcc.c': expected a command name"),
    ("[launcher]\nkind = 'qsub'", "field 'launcher.kind': expected one of none, mpirun, srun"),
    ("timeout = ", "not valid TOML"),
    ("[grading]\nseed = true", "field 'grading.seed': expected a text or a whole number"),
    ("[grading]\nsed = 'x'", "field 'grading.sed': unknown field"),
])
def test_broken_project_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "idrrun.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        config.load(tmp_path, environ={})
    assert str(tmp_path / "idrrun.toml") in str(info.value)


def test_grading_seed_from_the_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "idrrun.toml").write_text("[grading]\nseed = 2026\n")
    assert config.load(tmp_path, environ={}).grading_seed == "2026"
    assert config.load(tmp_path, environ={"IDRRUN_GRADING_SEED": "spring"}).grading_seed == "spring"
    assert config.load(tmp_path / "elsewhere", environ={}).grading_seed is None


def test_idris_site_file(tmp_path: Path) -> None:
    site = {
        "nvhpc": {"c": {"compiler": "nvc", "extension": ".c"},
                  "fortran": {"compiler": "nvfortran", "extension": ".f90"}},
        "gcc": {"c": {"compiler": "gcc-12", "extension": ".c"}},
        "profiling": {"command": "nsys profile", "default_options": ["--trace=openacc,cuda"]},
        "launcher": {"command": "srun", "tasks": "--ntasks=", "threads": "--cpus-per-task=",
                     "gpus": "--gres=gpu:", "options": ["--qos=qos_gpu-dev"]},
        "default_settings": {"gpus": 1, "compilers": "nvhpc", "language": "fortran"},
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(site))
    s = config.load(tmp_path, environ={"IDR_CONFIG_FILE": str(path)})
    assert s.family == "nvhpc" and s.language == "fortran" and s.values["gpus"] == 1
    assert s.compiler_command("gcc", "c") == "gcc-12"
    assert s.launcher.kind == "srun" and s.launcher.gpus == "--gres=gpu:"
    assert s.profiler == ("nsys", "profile", "--trace=openacc,cuda")
    (tmp_path / "idrrun.toml").write_text('family = "gcc"\n')  # the project file wins
    assert config.load(tmp_path, environ={"IDR_CONFIG_FILE": str(path)}).family == "gcc"


def test_idris_site_file_takes_what_it_understands(tmp_path: Path) -> None:
    """Entries of the wrong shape are passed over, one by one: the site file is IDRIS's, written
    for its own tool, and idrrun reads only the parts it has a use for."""
    site = {
        "gcc": {"c": {"compiler": "gcc-13"}, "fortran": {"compiler": 7}, "c++": "g++",
                "cuda": {"extension": ".cu"}},
        "nvhpc": "not a table",
        "intel": {"c": {"compiler": "icx"}},
        "launcher": {"command": "/opt/openmpi/bin/mpirun --bind-to none", "tasks": "-np ",
                     "options": ["--oversubscribe", 2]},
        "profiling": {"command": "nsys profile"},
        "default_settings": {"compilers": "intel", "language": 3, "gpus": 0},
    }
    path = tmp_path / "site.json"
    path.write_text(json.dumps(site))
    assert config.read_idris_site_file(path) == {
        "compilers": {"gcc": {"c": "gcc-13"}},
        "launcher": {"kind": "mpirun", "command": "/opt/openmpi/bin/mpirun --bind-to none",
                     "tasks": "-np ", "threads": "", "gpus": "", "options": ["--oversubscribe", "2"]},
        "profiler": ["nsys", "profile"],
    }
    path.write_text(json.dumps({"launcher": {"command": ""}, "profiling": {"default_options": ["-x"]},
                                "default_settings": {"compilers": "pgi", "gpus": 2}, "pgi": {}}))
    assert config.read_idris_site_file(path) == {"compilers": {"pgi": {}}, "family": "pgi", "gpus": 2}
    path.write_text(json.dumps({"default_settings": "nvhpc"}))
    assert config.read_idris_site_file(path) == {}


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "expected a JSON object"),
    ("{'gcc': 1}", "cannot read the IDRIS site file: Expecting property name"),
    ("[" * 100_000, "cannot read the IDRIS site file"),
])
def test_broken_idris_site_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "site.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"site.json \\(IDR_CONFIG_FILE\\): {message}"):
        config.read_idris_site_file(path)
    with pytest.raises(ConfigError, match="cannot read the IDRIS site file"):
        config.read_idris_site_file(tmp_path / "missing.json")


def test_the_grader_leaves_the_project_file_out_unless_given(tmp_path: Path) -> None:
    (tmp_path / "idrrun.toml").write_text('family = "pgi"\n')
    teacher = tmp_path / "teacher.toml"
    teacher.write_text('family = "gcc"\n')
    assert config.load(tmp_path, environ={}).family == "pgi"
    left_out = config.load(tmp_path, environ={}, project=False)
    assert left_out.family is None and left_out.files == ()
    given = config.load(tmp_path, environ={"IDRRUN_TIMEOUT": "7"}, project=teacher)
    assert given.family == "gcc" and given.files == (str(teacher),) and given.values["timeout"] == 7
    with pytest.raises(ConfigError, match="missing.toml \\(--config\\): no such file"):
        config.load(tmp_path, environ={}, project=tmp_path / "missing.toml")


def test_folders_are_absolute_so_no_tool_reads_them_as_options(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = config.load(tmp_path, environ={"IDRRUN_CACHE_DIR": "-cache", "IDRRUN_EXAMPLES": "-ex"})
    assert s.cache_dir == tmp_path / "-cache" and s.examples_dir == tmp_path / "-ex"
    monkeypatch.setenv("XDG_CACHE_HOME", "-xdg")
    assert config.load(tmp_path, environ={}).cache_dir == tmp_path / "-xdg" / "idrrun"
