"""Every `oto` command explains itself: `oto --help` lists the commands and each command's --help describes
every argument it takes (found through argparse itself, so a new command is checked without listing it)."""

from __future__ import annotations

import argparse

import pytest
from oto.cli import main
from workflow_helpers import REPO


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def _commands(capsys) -> list[str]:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "oto COMMAND --help" in out
    return [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.strip()]


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_every_command_describes_every_argument(capsys, monkeypatch):
    def capture(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    commands = _commands(capsys)
    assert {"env", "plan", "registry", "replay", "strategies", "deck-manifest"} <= set(commands)
    for command in commands:
        with pytest.raises(_Parsed) as parsed:
            main([command])
        for parser in _parsers(parsed.value.parser):
            assert parser.description, f"{parser.prog}: no description"
            for action in parser._actions:
                if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                    continue
                name = action.option_strings[-1] if action.option_strings else action.dest
                assert action.help and action.help != argparse.SUPPRESS, f"{parser.prog} {name}: no help"


def test_help_runs(capsys):
    with pytest.raises(SystemExit) as done:
        main(["registry", "export-t4", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "registry.sqlite" in out and "--library" in out and "T4" in out
    # `oto calibrate --help` names its other modes (it showed only the logic-file mode)
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    out = capsys.readouterr().out
    assert "oto calibrate --bundles BUNDLE... --arch ARCH" in " ".join(out.split()) and "--joint" in out


def test_oto_env_reads_the_run_config_as_snakemake_layers_it_and_names_a_broken_file(
    tmp_path, monkeypatch, capsys
):
    """`oto env --config night.yaml` checks the arch the run would have (config/config.yaml's where the night
    file names none), and a broken file is named with its line (it raised a traceback)."""
    import json

    from oto.environment import main as env_main

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("arch: gfx1103\nfamilies: all\n")
    (tmp_path / "night.yaml").write_text("seed: 2\n")
    (tmp_path / "broken.yaml").write_text("deck: [1, 2\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OTO_TENSILE_PYTHON", raising=False)
    assert env_main(["--config", "night.yaml", "--profiles", str(REPO / "arch_profiles"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["arch"] == "gfx1103"  # config/config.yaml's: the night file names none
    assert env_main(["--config", "broken.yaml"]) == 2
    assert "broken.yaml: YAML syntax error at line 2" in capsys.readouterr().err
