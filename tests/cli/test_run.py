"""``deputy-runtime run`` end to end, in subprocesses: quickstart, plain output, JSON, errors."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deputy_runtime import decode_event
from deputy_runtime._cli.run import OFFLINE_MODEL, select_model
from deputy_runtime.runtime import DelegationEnd, DelegationStart, RunStart, StopEvent, ToolStart
from tests.cli._runhelp import EXAMPLE_AGENTS, REPO_ROOT, offline_env, run_cli, tool_free_agents

pytestmark = pytest.mark.slow

_PLAIN_LINE = re.compile(r"^\[\s*\d+\.\d\ds\] \S+: ")


def _quickstart_lines() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.S)
    assert block is not None, "README Quickstart has no fenced block"
    return [line for line in block.group(1).splitlines() if line.strip()]


_UNTRACKED = shutil.ignore_patterns(
    ".git", ".venv", "venv", "__pycache__", "*.pyc", ".*_cache", ".hypothesis", "*.egg-info"
)


def _copy_tracked_tree(destination: Path) -> None:
    # safe.directory: CI may run as root in a checkout owned by another user, which git
    # otherwise refuses ("dubious ownership"). Without git (or a repository), copy the
    # tree minus what .gitignore would leave out.
    try:
        listed = subprocess.run(
            ["git", "-c", "safe.directory=*", "ls-files", "-z"],
            cwd=REPO_ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(REPO_ROOT, destination, ignore=_UNTRACKED, dirs_exist_ok=True)
        return
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is skipped
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _example_agent_names() -> list[str]:
    names = []
    for path in sorted(EXAMPLE_AGENTS.iterdir()):
        if path.suffix not in (".yaml", ".yml", ".md"):
            continue
        match = re.search(r"^name:\s*(\S+)", path.read_text(encoding="utf-8"), re.M)
        names.append(match.group(1) if match else path.stem)
    return names


def test_readme_quickstart_run_step_works_from_a_fresh_copy(tmp_path: Path) -> None:
    lines = _quickstart_lines()
    assert len(lines) == 2
    assert (REPO_ROOT / ".ci" / "run").read_text().rstrip().endswith(lines[1])
    run_step = lines[0].split("&&")[-1].strip()
    argv = shlex.split(run_step)
    # The line's own interpreter (a .venv it creates) is this test's sys.executable.
    assert argv[0] in ("python3", ".venv/bin/python"), run_step
    assert argv[1:4] == ["-m", "deputy_runtime", "run"], run_step
    copy = tmp_path / "repo"
    _copy_tracked_tree(copy)
    done = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=copy,
        env=offline_env(copy),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines()[0].startswith(f"Model: {OFFLINE_MODEL} - the offline"), out
    assert "NOT a real model" in out.splitlines()[0]
    started = re.findall(r"^\[.*\] (\S+): delegation started", out, re.M)
    completed = re.findall(r"^\[.*\] (\S+): delegation completed \(complete\)", out, re.M)
    assert len(completed) >= 2, out
    assert sorted(completed) == sorted(started), out  # every delegation that ran completed
    summary = out.split("\n\n", 1)[1]
    for name in _example_agent_names():
        assert name in summary, (name, summary)
    assert re.search(r"^total\s+lead \+ subagents\s+\d+", summary, re.M)
    assert "\nAnswer:\n" in out
    assert "Traceback" not in done.stderr


def test_plain_output_when_not_a_terminal() -> None:
    done = run_cli("run", "--agents", str(EXAMPLE_AGENTS), "Summarise the examples")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b[" not in out  # no escape codes into a pipe
    first, *rest = out.splitlines()
    assert first.startswith("Model: test")
    events = rest[: rest.index("")]
    assert events
    assert all(_PLAIN_LINE.match(line) for line in events), events
    assert events[0].endswith("lead: run started (requests 0/25)")
    assert re.search(r"lead: run ended \(complete\) \d+ requests", events[-1])
    started = {m for m in re.findall(r"\] (\S+): delegation started", out)}
    ended = {m for m in re.findall(r"\] (\S+): delegation (?:completed|stopped|failed)", out)}
    assert started
    assert started <= ended
    header = re.search(
        r"^delegation\s+agent\s+status\s+stop reason\s+requests\s+tokens\s+cost$", out, re.M
    )
    assert header is not None, out


def test_json_lines_parse_and_ids_correlate() -> None:
    done = run_cli("run", "--json", "--agents", str(EXAMPLE_AGENTS), "Summarise the examples")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("Model: test")
    events = [decode_event(line) for line in done.stdout.splitlines()]
    assert len(events) == len(done.stdout.splitlines()) > 5
    lead_start = events[0]
    assert isinstance(lead_start, RunStart)
    assert lead_start.delegation_id is None
    lead_ids = (lead_start.agent_id, lead_start.run_id)
    last = events[-1]
    assert isinstance(last, StopEvent)
    assert (last.agent_id, last.run_id) == lead_ids
    starts = {e.delegation_id: e for e in events if isinstance(e, DelegationStart)}
    ends = {e.delegation_id: e for e in events if isinstance(e, DelegationEnd)}
    assert starts
    assert set(starts) <= set(ends)
    delegate_calls = {
        e.call_delegation_id
        for e in events
        if isinstance(e, ToolStart) and e.tool_name == "delegate_to_agent"
    }
    assert set(ends) == delegate_calls
    for event in events:
        if event.delegation_id is None:
            assert (event.agent_id, event.run_id) == lead_ids, event
            continue
        assert (event.parent_agent_id, event.parent_run_id) == lead_ids, event
        start = starts.get(event.delegation_id)
        if start is not None:  # a setup failure has an end but no start
            assert (event.agent_id, event.run_id) == (start.agent_id, start.run_id)
    completed = [e for e in ends.values() if e.status == "completed"]
    assert len(completed) >= 2
    assert last.usage.requests == 1 + 1 + sum(e.usage.requests for e in ends.values())


def test_trio_backend_gives_the_same_run(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha", "beta")
    done = run_cli("run", "--backend", "trio", "--agents", str(agents), "Do it", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(re.findall(r"delegation completed \(complete\)", done.stdout)) == 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--agents", "no/such/dir"],
            "deputy-runtime run: --agents 'no/such/dir' does not exist; point --agents at",
        ),
        (["--model", "nope/x"], "no provider named 'nope'; a model is provider/model"),
        (["--plugin", "missing_plugin.py"], "--plugin 'missing_plugin.py': no such file"),
        (["--max-requests", "-1"], "argument --max-requests: expected a whole number of at"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    tool_free_agents(tmp_path / "agents", "alpha")
    argv = ["run", *args, "Do it"]
    if "--agents" not in args:
        argv[1:1] = ["--agents", "agents"]
    done = run_cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_invalid_definition_file_is_named(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    (agents / "broken.yaml").write_text("version: 1\nname: [\n", encoding="utf-8")
    done = run_cli("run", "--agents", str(agents), "Do it", cwd=tmp_path)
    assert done.returncode == 2
    assert "broken.yaml" in done.stderr
    assert "Traceback" not in done.stderr


def test_empty_agents_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    done = run_cli("run", "--agents", "agents", "Do it", cwd=tmp_path)
    assert done.returncode == 2
    assert "holds no definition files" in done.stderr


def test_request_limit_stop_exits_3(tmp_path: Path) -> None:
    agents = tool_free_agents(tmp_path / "agents", "alpha")
    done = run_cli("run", "--max-requests", "1", "--agents", str(agents), "Do it", cwd=tmp_path)
    assert done.returncode == 3, done.stdout
    assert "Stopped: request_limit" in done.stdout


def test_model_selection_order() -> None:
    assert select_model("openai/gpt-x", {"ANTHROPIC_API_KEY": "k"})[0] == "openai/gpt-x"
    spec, note = select_model(None, {"ANTHROPIC_API_KEY": "k"})
    assert spec.startswith("anthropic/")
    assert "ANTHROPIC_API_KEY is set" in note
    spec, note = select_model(None, {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"})
    assert spec.startswith("openai/")
    assert "OPENAI_API_KEY is set" in note
    spec, note = select_model(None, {"OPENAI_API_KEY": "  "})  # blank keys do not count
    assert spec == OFFLINE_MODEL
    assert "NOT a real model" in note
