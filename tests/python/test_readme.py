"""The README's quick start runs as shown: every command of its first shell
block (but the one-time setup, which the test run itself has done), in order;
its list of C++ headers is the installed one."""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quick_start_commands():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"## Quick start\n.*?```bash\n(.*?)```", text, re.S).group(1)
    commands = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    return [c for c in commands if not c.startswith("bash scripts/setup.sh")]


def test_the_quick_start_is_near_the_top_and_runs_as_shown():
    text = open(os.path.join(ROOT, "README.md")).read()
    assert text.index("## Quick start") < 1000, "the quick start must be on the README's first screen"
    commands = quick_start_commands()
    assert len(commands) >= 4
    for path in ("/tmp/photos", "/tmp/photos.lmdb"):
        shutil.rmtree(path, ignore_errors=True)
    if shutil.which("lmdbloader") is None:
        pytest.skip("the lmdbloader command is not on PATH")
    for command in commands:
        res = subprocess.run(command.replace("python3 ", f"{os.environ.get('PYTHON', 'python3')} ", 1),
                             shell=True, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{command}\n{res.stdout}\n{res.stderr}"
    assert "epoch 1: 512 images" in res.stdout


def test_the_header_list_names_every_installed_header():
    """The C++ guide's list of headers is include/lmdbloader/, no more, no less."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    start = text.index("Headers in `include/lmdbloader/`:")
    listed = set(re.findall(r"`([a-z_0-9]+\.h)`", text[start:text.index("`Reader::Open(path", start)]))
    installed = {n for n in os.listdir(os.path.join(ROOT, "include", "lmdbloader")) if n.endswith(".h")}
    assert listed == installed, f"missing from the README: {sorted(installed - listed)}; not installed: " \
                                f"{sorted(listed - installed)}"


def test_ci_runs_the_readmes_test_command():
    """CI proves what a new user runs: .ci/run calls the README's test command."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## Two commands"):text.index("## Guides")]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    commands = [line.strip() for b in blocks for line in b.splitlines() if line.strip()]
    assert "bash scripts/demo.sh" in commands and "bash scripts/test.sh" in commands, commands
    ci = [line.strip() for line in open(os.path.join(ROOT, ".ci", "run")) if not line.lstrip().startswith("#")]
    assert "bash scripts/test.sh" in ci, ".ci/run does not run the README's test command"


def test_the_readme_stays_at_most_300_lines():
    """The README is the first read: detail belongs in docs/ (NOTES, MEASURED, DEVELOPING), linked."""
    lines = open(os.path.join(ROOT, "README.md")).read().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail to docs/ and link it"
