"""``run --temporal`` draws delegations in their definitions' colours, as ``run`` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_runtime._cli.hostsetup import host_setup, model_choice, task_text
from deputy_runtime._cli.run_temporal import lead_request
from deputy_runtime._cli.view import definition_colours
from deputy_runtime.cli import _parser


def test_the_definitions_colours_reach_the_live_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "scout.md").write_text(
        "---\nname: scout\ndescription: Looks.\ntools: Read\ncolor: Cyan\n---\nLook.\n"
    )
    (agents / "plain.md").write_text("---\nname: plain\ndescription: P.\ntools: Read\n---\nP.\n")
    monkeypatch.chdir(tmp_path)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    args = _parser().parse_args(
        ["run", "--temporal", "127.0.0.1:7233", "--agents", str(agents), "Look around"]
    )
    setup = host_setup(args)
    request = lead_request(args, task_text(args), setup, model_choice(args, setup.plugins))
    # run_durable draws with these colours, computed as the in-process run computes them.
    colours = definition_colours(setup.loaded.definitions.values())
    assert colours == {"scout": "cyan"}  # only agents that have one
    assert sorted(s.name for s in request.sub_agents) == ["plain", "scout"]
