"""Every `oto` command explains itself: `oto --help` lists the commands and each command's --help describes
every argument it takes (found through argparse itself, so a new command is checked without listing it)."""

from __future__ import annotations

import argparse

import pytest
from oto.cli import main


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
