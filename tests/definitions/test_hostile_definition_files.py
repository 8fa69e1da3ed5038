"""Hostile definition files: each test performs the attack and asserts the safe outcome.

Times are only ever compared with a same-size valid file read in the same test (best of
several runs each), never with a fixed number of seconds: the machine may be loaded.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deputy_runtime.definitions import (
    agent_definition,
    agent_definition_from_markdown,
    agent_definition_read,
    agent_definition_to_markdown,
    agent_definition_write,
    agent_definitions,
    collect_agent_definitions,
    validate_definitions,
)
from deputy_runtime.definitions._files import MAX_DEFINITION_BYTES
from deputy_runtime.definitions._yaml import MAX_INT_DIGITS, MAX_ITEMS, MAX_KEYS, plain_int
from deputy_runtime.errors import DefinitionFileError
from tests.definitions._definition_helpers import make_tool

REPO = Path(__file__).resolve().parents[2]
YAML_HEAD = "version: 1\nname: a\ndescription: d\nprompt: p\n"
MD_HEAD = "---\nname: a\ndescription: d\n"
# A slowdown bigger than this against the same-size valid file fails the test. The
# unbounded behaviours were 40x to 400x slower; a linear check stays within a few times.
MAX_RATIO = 10.0
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def best_time(read: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs of ``read`` (DefinitionFileError counts as done)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.suppress(DefinitionFileError):
            read()
        best = min(best, time.perf_counter() - start)
    return best


def padded(head: str, tail: str, size: int) -> str:
    """A valid file of ``size`` bytes: ``head``, a long plain (unquoted) value, ``tail``."""
    filler = size - len(head) - len(tail) - len("initial_prompt: x\n")
    return f"{head}initial_prompt: x{'x' * filler}\n{tail}"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def assert_refused_in_time(
    bad: Path, good: Path, read: Callable[[Path], object], reason: str
) -> DefinitionFileError:
    assert abs(bad.stat().st_size - good.stat().st_size) < 64
    read(good)  # the baseline is valid
    with pytest.raises(DefinitionFileError) as info:
        read(bad)
    assert type(info.value) is DefinitionFileError
    assert info.value.path == bad
    assert reason in info.value.reason, info.value.reason
    ratio = best_time(lambda: read(bad)) / best_time(lambda: read(good))
    assert ratio < MAX_RATIO, f"{bad.name} took {ratio:.1f}x the same-size valid file"
    return info.value


# -- integers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "form"),
    [
        ("0x" + "f" * 4000, "hexadecimal notation is not accepted"),
        ("0b" + "1" * 4000, "binary notation is not accepted"),
        ("9" * 5000, f"more than {MAX_INT_DIGITS} digits"),
        ("1_000", "'_' digit separators are not accepted"),
        ("0755", "YAML 1.1 reads a leading 0 as an octal number"),
        ("1:30", "base-60"),
    ],
)
def test_exotic_or_oversized_integers_are_definition_file_errors(
    tmp_path: Path, value: str, form: str
) -> None:
    yaml_file = write(tmp_path / "a.yaml", f"{YAML_HEAD}max_requests: {value}\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_read(yaml_file)
    assert (info.value.path, info.value.line) == (yaml_file, 5)
    assert form in info.value.reason
    assert "expected a plain decimal whole number such as 42" in info.value.reason
    assert len(info.value.reason) < 600  # the value is shortened, not printed whole
    md_file = write(tmp_path / "a.md", f"{MD_HEAD}maxTurns: {value}\n---\nbody\n")
    with pytest.raises(DefinitionFileError) as info:
        agent_definition_from_markdown(md_file)
    assert (info.value.path, info.value.line) == (md_file, 4)
    assert form in info.value.reason
    params = write(tmp_path / "p.yaml", f"{YAML_HEAD}params:\n  seed: {value}\n")
    with pytest.raises(DefinitionFileError, match="plain decimal"):
        agent_definition_read(params)


@pytest.mark.slow
def test_validate_reports_a_huge_hex_integer_without_a_traceback(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", f"{YAML_HEAD}max_requests: 0x{'f' * 4000}\n")
    result = subprocess.run(
        [sys.executable, "-m", "deputy_runtime", "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout.startswith(f"{tmp_path / 'a.yaml'}:5: The value '0xffff")
    assert "hexadecimal notation is not accepted" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["yaml", "markdown"])
def test_a_base60_integer_of_1_mib_fails_in_linear_time(tmp_path: Path, kind: str) -> None:
    size = MAX_DEFINITION_BYTES - 64
    if kind == "yaml":
        head, read = YAML_HEAD + "max_requests: ", agent_definition_read
        good = write(tmp_path / "good.yaml", padded(YAML_HEAD, "", size))
    else:
        head, read = MD_HEAD + "maxTurns: ", agent_definition_from_markdown
        good = write(
            tmp_path / "good.md",
            padded(MD_HEAD, "---\nbody\n", size).replace("initial_", "initialP"),
        )
    digits = ":".join(["59"] * ((size - len(head) - 20) // 3))
    tail = "\n" if kind == "yaml" else "\n---\nbody\n"
    bad = write(
        tmp_path / f"bad.{'yaml' if kind == 'yaml' else 'md'}", f"1{digits}".join([head, tail])
    )
    assert_refused_in_time(bad, good, read, "base-60")


@SETTINGS
@given(text=st.text(max_size=60))
def test_plain_int_reads_only_plain_decimal(text: str) -> None:
    digits = text[1:] if text[:1] in "+-" else text
    plain = digits.isascii() and digits.isdigit() and (digits == "0" or digits[0] != "0")
    if plain and len(digits) <= MAX_INT_DIGITS:
        assert plain_int(text) == int(text)
    else:
        with pytest.raises(ValueError):
            plain_int(text)


# -- paths ------------------------------------------------------------------------------


NUL_PATH = "agents/a\0b.yaml"


@pytest.mark.parametrize(
    "call",
    [
        lambda: agent_definition_read(NUL_PATH),
        lambda: agent_definition_from_markdown(NUL_PATH),
        lambda: agent_definitions(NUL_PATH),
        lambda: collect_agent_definitions(NUL_PATH),
        lambda: validate_definitions([NUL_PATH]),
        lambda: agent_definition_write(agent_definition("a", "d", "p"), NUL_PATH),
        lambda: agent_definition_to_markdown(agent_definition("a", "d", "p"), NUL_PATH),
    ],
    ids=["read", "from_markdown", "discover", "collect", "validate", "write", "to_markdown"],
)
def test_a_path_containing_nul_is_a_definition_file_error(call: Callable[[], object]) -> None:
    with pytest.raises(DefinitionFileError) as info:
        call()
    assert str(info.value.path) == "agents/a\\0b.yaml"
    assert "contains a NUL character" in info.value.reason


def test_validate_command_rejects_a_nul_path(capsys: pytest.CaptureFixture[str]) -> None:
    from deputy_runtime.cli import main

    assert main(["validate", NUL_PATH]) == 2
    assert "deputy-runtime validate: 'agents/a\\x00b.yaml'" in capsys.readouterr().err


@SETTINGS
@given(path=st.text(min_size=1, max_size=40))
def test_any_text_path_gives_a_definition_or_a_definition_file_error(
    path: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Inside an empty directory, whatever the text: NUL, surrogates, '..', '/'.
    base = tmp_path_factory.getbasetemp() / "empty-directory"
    base.mkdir(exist_ok=True)
    for read in (agent_definition_read, agent_definition_from_markdown):
        outcome: object
        try:
            outcome = read(f"{base}/{path}")
        except DefinitionFileError as exc:
            outcome = exc
        if isinstance(outcome, DefinitionFileError):
            assert outcome.reason
            assert "\0" not in str(outcome.path)
            assert type(outcome) is DefinitionFileError
        else:  # pragma: no cover - the directory is empty, so no path names a definition
            raise AssertionError(f"{path!r} read as {outcome!r}")


# -- sizes ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["yaml", "markdown"])
def test_a_tools_list_of_480k_items_is_refused_early(tmp_path: Path, kind: str) -> None:
    items = ",".join(["a"] * 480_000)
    size = len(items) + 200
    if kind == "yaml":
        bad = write(tmp_path / "bad.yaml", f"{YAML_HEAD}tools: [{items}]\n")
        good = write(tmp_path / "good.yaml", padded(YAML_HEAD, "", bad.stat().st_size))
        read: Callable[[Path], object] = agent_definition_read
    else:
        bad = write(tmp_path / "bad.md", f"{MD_HEAD}tools: [{items}]\n---\nbody\n")
        text = padded(MD_HEAD, "---\nbody\n", bad.stat().st_size)
        good = write(tmp_path / "good.md", text.replace("initial_", "initialP"))
        read = agent_definition_from_markdown
    assert size > MAX_DEFINITION_BYTES // 2
    error = assert_refused_in_time(
        bad, good, read, f"value of 'tools' has more than {MAX_ITEMS:,} entries"
    )
    assert error.line == 5 if kind == "yaml" else error.line == 4


@pytest.mark.slow
def test_frontmatter_with_60k_keys_is_refused_early(tmp_path: Path) -> None:
    keys = "".join(f"k{index}: v\n" for index in range(60_000))
    bad = write(tmp_path / "bad.md", f"{MD_HEAD}{keys}---\nbody\n")
    text = padded(MD_HEAD, "---\nbody\n", bad.stat().st_size)
    good = write(tmp_path / "good.md", text.replace("initial_", "initialP"))
    assert_refused_in_time(
        bad,
        good,
        agent_definition_from_markdown,
        f"the top-level mapping has more than {MAX_KEYS:,} keys",
    )


def test_lists_and_mappings_at_the_limits_still_load(tmp_path: Path) -> None:
    registry = {f"t{index}": make_tool(f"t{index}") for index in range(MAX_ITEMS)}
    names = ", ".join(registry)
    params = "".join(f"  p{index}: {index}\n" for index in range(MAX_KEYS))
    path = write(tmp_path / "a.yaml", f"{YAML_HEAD}tools: [{names}]\nparams:\n{params}")
    definition = agent_definition_read(path, registry)
    assert len(definition.tools) == MAX_ITEMS
    assert definition.params is not None
    assert len(definition.params) == MAX_KEYS
    write(path, f"{YAML_HEAD}params:\n{params}  one_more: 1\n")
    with pytest.raises(DefinitionFileError, match=r"value of 'params' has more than 256 keys"):
        agent_definition_read(path)
