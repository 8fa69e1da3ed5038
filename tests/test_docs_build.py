"""The documentation site builds with ``mkdocs build --strict``.

Strict mode turns every warning into an error: a broken link or anchor between pages, a
missing snippet file, or an API reference entry mkdocstrings cannot resolve fails the
build, so it fails this test. A page that exists but is not in ``nav`` is only reported
(the ``validation`` settings in mkdocs.yml), so new pages can land before nav lists them.

The build needs the ``docs`` extra (part of the ``test`` extra). Without mkdocs the tests
fail when the ``CI`` environment variable is set (CI must build the docs) and are skipped
with the reason otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _require_mkdocs() -> None:
    missing = [name for name in DOCS_MODULES if not _importable(name)]
    if not missing:
        return
    reason = (
        f"the docs build needs {', '.join(missing)}: install the docs extra "
        "(pip install -e '.[docs]')"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {reason}")
    pytest.skip(reason)


#: What ``mkdocs build`` with this site's configuration imports.
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent package is missing
        return False


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    _require_mkdocs()
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "getting-started/index.html", "reference/runtime/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # The API reference is generated from the package, not written by hand.
    reference = (tmp_path / "site" / "reference" / "runtime" / "index.html").read_text()
    assert 'id="deputy_runtime.runtime.LeadAgent"' in reference
    chat = (tmp_path / "site" / "reference" / "chat" / "index.html").read_text()
    assert 'id="deputy_runtime.chat.OpenAIProvider"' in chat  # a lazily loaded export
    # The docstrings' Sphinx roles are rendered as code (docs/_griffe/sphinx_roles.py).
    assert ":class:`" not in chat
    assert "<code>AssistantTurn</code>" in chat


@pytest.mark.slow
def test_a_broken_link_fails_and_an_unlisted_page_does_not(tmp_path: Path) -> None:
    """The strictness is real: the site's own settings, one unlisted page, one bad link."""
    _require_mkdocs()
    settings = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    settings["nav"] = [{"Home": "index.md"}]  # a small site, built with the same rules
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the new page](unlisted.md).\n")
    (docs / "unlisted.md").write_text("# Not in nav yet\n\nBack [home](index.md).\n")
    passed = _build(config, tmp_path / "site-ok")
    assert passed.returncode == 0, passed.stdout + passed.stderr

    (docs / "unlisted.md").write_text("# Not in nav yet\n\nSee [gone](no-such-page.md).\n")
    failed = _build(config, tmp_path / "site-broken")
    assert failed.returncode != 0
    assert "no-such-page.md" in failed.stdout + failed.stderr


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_getting_started_shows_the_readme_embedding_example() -> None:
    """The README's embedding example runs in tests/test_examples.py; the copy in the
    getting-started page is checked to be the same code, so the two cannot drift."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Embedding", 1)[1].split("\n## ", 1)[0]
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    (example,) = _python_blocks(section)
    assert example in _python_blocks(page)


def _page_example(page: str) -> dict[str, object]:
    """Run the first python block of a docs page; return the names it defined."""
    (code, *_) = _python_blocks((ROOT / "docs" / page).read_text(encoding="utf-8"))
    namespace: dict[str, object] = {"definitions": []}  # the one name pages take as given
    exec(compile(code, page, "exec"), namespace)
    return namespace


@pytest.mark.anyio
async def test_events_page_handler_sees_a_real_run(capsys: pytest.CaptureFixture[str]) -> None:
    from deputy_runtime import LeadAgent, UsageLimits, agent_definition, chat

    on_event = _page_example("concepts/events.md")["on_event"]
    helper = agent_definition("helper", "Helps.", "Be helpful.", max_requests=2)
    lead = LeadAgent(chat("test"), [helper], usage_limits=UsageLimits(max_requests=5))
    await lead.run("Help with this.", on_event=on_event)  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    assert "lead: delegate_to_agent" in lines
    assert "helper stopped: complete" in lines
    assert lines[-1] == "lead stopped: complete"
    assert any(line.startswith("delegation ") and line.endswith(" settled") for line in lines)


def test_tools_and_hooks_page_examples_build_what_they_say() -> None:
    from deputy_runtime import HookEvent, Hooks, LeadAgent, Tool

    word_count = _page_example("concepts/tools.md")["word_count"]
    assert isinstance(word_count, Tool)
    assert word_count.read_only
    assert word_count.parameters["properties"]["unique"]["description"] == (
        "Count each distinct word once."
    )
    assert word_count.function(text="a b a", unique=True) == 2
    hooks_page = _page_example("concepts/hooks.md")
    hooks, lead = hooks_page["hooks"], hooks_page["lead"]
    assert isinstance(hooks, Hooks)
    assert hooks.has(HookEvent.PreToolUse)
    assert isinstance(lead, LeadAgent)
