"""The samples' output-folder convention (docs/guides/samples.md): a sample writes its files
into ``--out DIR``, else ``$FLUIDLITE_SAMPLES_OUT``, else ``./samples_out`` -- never beside
its sources -- and ``samples/_common.py`` is a helper, not a sample."""
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")


def _common():
    spec = importlib.util.spec_from_file_location("samples_common",
                                                  os.path.join(SAMPLES, "_common.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_out_dir_prefers_the_argument_then_the_environment_then_samples_out(tmp_path,
                                                                          monkeypatch):
    common = _common()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(common.OUT_ENV, raising=False)
    assert common.out_dir() == "samples_out" and (tmp_path / "samples_out").is_dir()
    monkeypatch.setenv(common.OUT_ENV, str(tmp_path / "from_env"))
    assert common.out_dir() == str(tmp_path / "from_env")
    assert common.out_dir(str(tmp_path / "from_arg")) == str(tmp_path / "from_arg")
    assert (tmp_path / "from_env").is_dir() and (tmp_path / "from_arg").is_dir()


def test_a_sample_writes_into_its_output_folder_only(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, FLUIDLITE_SAMPLES_OUT=str(tmp_path / "env_out"))
    before = set(os.listdir(SAMPLES))
    res = subprocess.run([sys.executable, os.path.join(SAMPLES, "visualize.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "env_out" / "mlp_program.html").exists()
    assert sorted(os.listdir(tmp_path)) == ["env_out"]          # nothing else in the cwd
    assert set(os.listdir(SAMPLES)) - before <= {"__pycache__"}


def test_the_helper_module_says_it_is_not_a_sample():
    res = subprocess.run([sys.executable, os.path.join(SAMPLES, "_common.py")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "not a sample" in res.stderr
