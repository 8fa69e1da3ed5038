"""Discovery of Claude Code plugin folders: plugin roots, folders of plugins, marketplaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deputy_runtime import DefinitionFileError
from deputy_runtime.definitions import (
    agent_definitions,
    collect_agent_definitions,
    find_plugins,
)
from deputy_runtime.tools import Tool, tools_file
from tests.plugin_folder import write_plugin


def _tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in tools_file(root)}


def _agent(folder: Path, name: str, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: The {name} agent.\ntools: Read\n{extra}---\nWork.\n"
    )


def test_a_plugin_root_gives_its_agents_namespaced_with_skills_and_commands(
    tmp_path: Path,
) -> None:
    plugin = write_plugin(tmp_path)
    warnings: list[object] = []
    found = agent_definitions(plugin, _tools(tmp_path), markdown=True, on_warning=warnings.append)
    assert list(found) == ["kit:checker"]  # README.md is never an agent
    checker = found["kit:checker"]
    # initialPrompt: /kit:brief notes.txt expands to the command's text.
    assert checker.initial_prompt == "Check notes.txt and report."
    assert [str(s) for s in checker.skills] == [str(plugin / "skills" / "style")]
    [only] = find_plugins(plugin) or ()
    assert (only.name, only.root, list(only.commands)) == ("kit", plugin, ["brief"])
    assert only.hooks is not None
    assert only.mcp_servers is not None


def test_without_a_manifest_the_folder_name_is_the_plugin_name(tmp_path: Path) -> None:
    _agent(tmp_path / "helpers" / "agents", "tidy")
    (tmp_path / "helpers" / "README.md").write_text("# helpers\n")
    found = agent_definitions(tmp_path / "helpers", _tools(tmp_path), markdown=True)
    assert list(found) == ["helpers:tidy"]


def test_a_plain_agent_folder_is_not_a_plugin(tmp_path: Path) -> None:
    _agent(tmp_path / "agents", "tidy")
    _agent(tmp_path / "agents" / "nested" / "agents", "inner")
    assert find_plugins(tmp_path / "agents") is None
    found = agent_definitions(tmp_path / "agents", _tools(tmp_path), markdown=True)
    assert list(found) == ["tidy"]


def test_commands_fill_their_arguments(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    (root / "commands").mkdir(parents=True)
    (root / "commands" / "two.md").write_text("First $1, then $2; all: $ARGUMENTS")
    (root / "commands" / "plain.md").write_text("Do the thing.")
    prompts = {
        "a": "/two x y",
        "b": "/kit:plain here please",
        "c": "/other:plain x",
        "d": "/missing",
    }
    for key, prompt in prompts.items():
        _agent(root / "agents", key, f"initialPrompt: {prompt}\n")
    warnings: list[object] = []
    found = agent_definitions(root, _tools(tmp_path), markdown=True, on_warning=warnings.append)
    assert found["kit:a"].initial_prompt == "First x, then y; all: x y"
    assert found["kit:b"].initial_prompt == "Do the thing.\n\nARGUMENTS: here please"
    assert found["kit:c"].initial_prompt == "/other:plain x"  # another plugin's: as written
    assert found["kit:d"].initial_prompt == "/missing"
    shown = [str(w) for w in warnings]
    assert len(shown) == 2
    assert all("names no command of plugin 'kit'" in w for w in shown)


def test_a_folder_of_plugins_and_a_marketplace(tmp_path: Path) -> None:
    _agent(tmp_path / "many" / "one" / "agents", "same")
    _agent(tmp_path / "many" / "two" / "agents", "same")
    found = agent_definitions(tmp_path / "many", _tools(tmp_path), markdown=True)
    assert list(found) == ["one:same", "two:same"]

    market = tmp_path / "market"
    _agent(market / "plugins" / "alpha" / "agents", "a")
    _agent(market / "extra" / "beta" / "agents", "b")
    (market / ".claude-plugin").mkdir()
    (market / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps(
            {
                "name": "market",
                "metadata": {"pluginRoot": "./plugins"},
                "plugins": [
                    {"name": "alpha", "source": "alpha"},
                    {"name": "beta", "source": "./extra/beta"},
                    {"name": "remote", "source": {"source": "github", "repo": "o/r"}},
                ],
            }
        )
    )
    found = agent_definitions(market, _tools(tmp_path), markdown=True)
    assert list(found) == ["alpha:a", "beta:b"]  # the git source is not fetched


def test_bad_plugin_files_name_the_file_and_field(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = root / ".claude-plugin" / "plugin.json"
    cases = [
        ("{not json", "not valid JSON"),
        (json.dumps({"name": "Bad Name!"}), "name must be the plugin's name"),
        (json.dumps({"name": "kit", "agents": "../elsewhere"}), "leaves the plugin folder"),
        (json.dumps({"name": "kit", "hooks": 3}), "hooks must be a path"),
        (json.dumps({"name": "kit", "mcpServers": "./none.json"}), "is not a file"),
    ]
    for text, message in cases:
        manifest.write_text(text)
        with pytest.raises(DefinitionFileError, match=message) as caught:
            find_plugins(root)
        assert str(manifest) in str(caught.value)
    # Two plugins of one name in a folder of plugins: both named in the error.
    for folder in ("x", "y"):
        (tmp_path / "two" / folder / ".claude-plugin").mkdir(parents=True)
        (tmp_path / "two" / folder / ".claude-plugin" / "plugin.json").write_text(
            json.dumps({"name": "same"})
        )
    with pytest.raises(DefinitionFileError, match="two plugins are named 'same'"):
        find_plugins(tmp_path / "two")


def test_collecting_keeps_going_past_a_bad_plugin_agent(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    _agent(root / "agents", "good")
    (root / "agents" / "bad.md").write_text("---\nname: bad\n---\nNo description.\n")
    found = collect_agent_definitions(root, _tools(tmp_path), markdown=True)
    assert list(found.definitions) == ["kit:good"]
    assert found.files == 2
    assert {p.path.name for p in found.errors} == {"bad.md"}
