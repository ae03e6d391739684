"""Packaging: what `pip install .` declares and installs (hilat alone: gateware/ and targets/ stay in
the checkout), what an install does (the wheel in a fresh venv), and a clear one-line error for a
missing extra.

Before: matplotlib and pyarrow were undeclared, so `report --html` and `export --parquet` of a
`pip install .` failed with a ModuleNotFoundError traceback; the wheel shipped `targets/sim.py` without
what it needs and hilat imported `targets.dut.cpu_soc`, absent from it."""

import ast
import email
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from synth import dut_edges, write_run

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
BLOCKER = Path(__file__).parent / "blocker"


def _requirement_name(req):
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("_", "-")


def _third_party_imports(folder):
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.partition(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require"
                  and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value.partition(".")[0])        # hilat.extras.require("pyarrow", ...)
    ours = {"hilat", "gateware", "targets"}
    return {n for n in names if n not in sys.stdlib_module_names and n not in ours}


# Extras installed in a venv of their own, not in this one: labgrid (its pyserial-labgrid and plain pyserial
# replace each other's `serial` module, labgrid issue #1245; scripts/setup-labgrid.sh).
OTHER_VENVS = [ROOT / ".venv-labgrid"]


def _packages_distributions(venv):
    script = "import importlib.metadata as m, json; print(json.dumps(m.packages_distributions()))"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("folder,allowed", [("host/hilat", ("dependencies", "serial", "pytest", "report", "gateware",
                                                           "labgrid", "fast")),
                                            ("targets", ("dependencies", "gateware", "boards")),
                                            ("gateware", ("dependencies", "gateware"))])
def test_every_import_is_declared(folder, allowed):
    """Each third-party module the package imports belongs to a distribution pyproject.toml declares,
    in the dependencies or an extra that folder may use."""
    project = PYPROJECT["project"]
    declared = {"dependencies": {_requirement_name(r) for r in project["dependencies"]}}
    for extra, reqs in project["optional-dependencies"].items():
        declared[extra] = {_requirement_name(r) for r in reqs}
    allowed_dists = set().union(*(declared[a] for a in allowed))
    dists_of = importlib.metadata.packages_distributions()
    imports = _third_party_imports(ROOT / folder)
    assert imports, folder
    if imports - set(dists_of):         # not installed here: maybe in the venv of its extra
        for venv in OTHER_VENVS:
            if (venv / "bin" / "python").exists():
                dists_of = {**_packages_distributions(venv), **dists_of}
    for module in sorted(imports):
        dists = {d.lower().replace("_", "-") for d in dists_of.get(module, [])}
        assert dists & allowed_dists, f"{folder} imports {module} ({dists or 'not installed'}): not in {allowed}"


def _checkout_imports(path):
    """The lines of ``path`` that import gateware or targets, or name them to importlib or require()."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            if getattr(node.func, "id", getattr(node.func, "attr", None)) in ("require", "import_module"):
                names = [str(node.args[0].value)]
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.partition(".")[0] in ("gateware", "targets")]
    return found


def test_hilat_never_imports_the_checkout():
    """The simulated rig is reached through its launcher's subprocess (hilat.simulator) only."""
    found = [line for path in sorted((ROOT / "host" / "hilat").rglob("*.py")) for line in _checkout_imports(path)]
    assert found == []
    assert _checkout_imports(Path(__file__).parent / "fake_rig.py")   # the scan sees a function-local import


INSTALLED_SIM_REFUSAL = ("hilat: the simulated rig runs from a clone of the repository (make demo); this hilat is "
                         "installed without it")


def test_the_simulated_rig_is_found_in_the_clone_or_refused_in_one_line(tmp_path):
    from hilat import simulator

    assert simulator.checkout_root() == ROOT          # the editable install of this clone
    env = {**os.environ, "HILAT_CHECKOUT": str(tmp_path)}   # a directory without targets/simrig.py
    for command in (["sim", "--on-rig"], ["demo", "--count", "5"]):
        result = subprocess.run([sys.executable, "-m", "hilat.cli", *command], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=60)
        assert result.returncode == 1 and result.stderr.splitlines() == [INSTALLED_SIM_REFUSAL], result.stderr


@pytest.mark.slow   # about 25 s: pip installs numpy, rich and pytest into the fresh venv (from its cache)
def test_the_wheel_in_a_fresh_venv_does_what_the_readme_promises(tmp_path):
    # The package's sources, copied out of the checkout: the build writes nothing into it.
    src = tmp_path / "src"
    (src / "host").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(ROOT / "host" / "hilat", src / "host" / "hilat", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(src)], check=True,
                   capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("hilat-*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = email.message_from_bytes(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))))
        names = z.namelist()
    # hilat and its metadata only: no top-level gateware/ or targets/ in site-packages.
    assert {n.split("/")[0] for n in names} == {"hilat", wheel.name.split("-py")[0] + ".dist-info"}, names
    assert "hilat/extras.py" in names and "hilat/simulator.py" in names and "hilat/calibration/__init__.py" in names
    extras = set(meta.get_all("Provides-Extra"))
    assert {"serial", "report", "gateware", "boards", "all"} <= extras
    requires = meta.get_all("Requires-Dist")
    for dist in ("matplotlib", "pyarrow"):
        assert any(r.startswith(dist) and 'extra == "report"' in r for r in requires), requires
    # pyserial is the serial extra, not a hard dependency: labgrid's pyserial-labgrid installs the same
    # module, and the two beside each other break one another (labgrid issue #1245).
    assert any(r.startswith("pyserial") and 'extra == "serial"' in r for r in requires), requires
    assert not any(r.startswith("pyserial") and "extra" not in r for r in requires), requires
    # labgrid brings pyserial-labgrid: an extra of its own, not in `all` (which has pyserial).
    assert any(r.startswith("labgrid") and 'extra == "labgrid"' in r for r in requires), requires
    assert not any("labgrid" in r and 'extra == "all"' in r for r in requires), requires

    # Nothing of the checkout's: no PYTHONPATH to it (the test session sets one; pip would take the
    # checkout's hilat.egg-info for an installed hilat), no HILAT_CHECKOUT.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HILAT_CHECKOUT")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, env=env)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    f"{wheel}[pytest]"], check=True, capture_output=True, env=env, cwd=tmp_path)
    work = tmp_path / "work"
    work.mkdir()

    def run(*argv):
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=work, timeout=120)

    result = run(venv / "bin" / "hilat", "--help")
    assert result.returncode == 0 and "hilat" in result.stdout and "report" in result.stdout, result.stderr
    run_dir = write_run(work / "run", dut_edges([1000, 6000], [50, 60], [140, 150]))
    result = run(venv / "bin" / "hilat", "report", run_dir)
    assert result.returncode == 0 and "stimulus -> ISR entry" in result.stdout, result.stderr
    for command in (["sim"], ["sim", "--on-rig"], ["demo", "--count", "5"]):
        result = run(venv / "bin" / "hilat", *command)
        assert result.returncode == 1 and result.stderr.splitlines() == [INSTALLED_SIM_REFUSAL], result.stderr
    result = run(venv / "bin" / "python", "-c", "import hilat\ntry:\n    hilat.simulate().__enter__()\n"
                 "except hilat.simulator.SimulatorUnavailable as e:\n    print(e)")
    assert result.stdout.strip() == INSTALLED_SIM_REFUSAL.removeprefix("hilat: "), result.stderr
    # The pytest plugin loads from its entry point: the fixture skips without a rig, --hilat-sim refuses.
    (work / "test_budget.py").write_text("def test_rig(hilat_rig):\n    pass\n")
    result = run(venv / "bin" / "python", "-m", "pytest", "-rs", "-p", "no:cacheprovider", "test_budget.py")
    assert result.returncode == 0 and "1 skipped" in result.stdout, result.stdout
    assert "no hilat rig configured" in result.stdout, result.stdout
    result = run(venv / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider", "test_budget.py", "--hilat-sim")
    assert result.returncode != 0 and INSTALLED_SIM_REFUSAL.removeprefix("hilat: ") in result.stdout, result.stdout


def _cli(tmp_path, hide, *argv):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BLOCKER), os.environ.get("PYTHONPATH", "")]),
           "HILAT_TEST_HIDE": ",".join(hide)}
    return subprocess.run([sys.executable, "-m", "hilat.cli", *map(str, argv)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("hide,argv,extra,feature", [
    (["matplotlib"], ["report", "RUN", "--html", "r.html"], "report", "plots"),
    (["matplotlib"], ["report", "RUN", "--plots", "plots"], "report", "plots"),
    (["pyarrow"], ["export", "RUN", "--parquet"], "report", "Parquet export"),
    (["litex", "migen"], ["sim"], "gateware", "the simulated rig"),
    (["litex", "migen"], ["demo", "--count", "5"], "gateware", "the simulated rig"),
])
def test_missing_extra_is_one_line_naming_it(tmp_path, hide, argv, extra, feature):
    run = write_run(tmp_path / "run", dut_edges([1000, 6000], [50, 60], [140, 150]))
    result = _cli(tmp_path, hide, *[run if a == "RUN" else a for a in argv])
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"hilat: {feature}") and f"pip install 'hilat[{extra}]'" in lines[0]
    assert f"needs {hide[0]}" in lines[0]


def test_what_needs_no_extra_works_without_them(tmp_path):
    run = write_run(tmp_path / "run", dut_edges([1000, 6000], [50, 60], [140, 150]))
    result = _cli(tmp_path, ["matplotlib", "pyarrow", "litex", "migen"], "report", run)
    assert result.returncode == 0 and "stimulus -> ISR entry" in result.stdout, result.stderr
    result = _cli(tmp_path, ["matplotlib", "pyarrow", "litex", "migen"], "export", run, "--csv", "--vcd")
    assert result.returncode == 0 and (run / "samples.csv").exists(), result.stderr
