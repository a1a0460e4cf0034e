"""`vta --help` and `vta CMD --help` (and `vta config ACTION --help`) render for every
subcommand the parser has: exit 0, the usage line first, every option of the command listed,
nothing on stderr. The list comes from the parser itself, so a new command is covered."""

from __future__ import annotations

import argparse

import pytest
from vta.cli.main import build_parser, main

pytestmark = pytest.mark.unit


def _commands() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """(argv prefix, parser) of every subcommand, nested ones (config show/write) too."""
    out: list[tuple[list[str], argparse.ArgumentParser]] = []

    def walk(prefix: list[str], parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out.append(([*prefix, name], sub))
                    walk([*prefix, name], sub)

    walk([], build_parser())
    return out


COMMANDS = _commands()


def test_every_command_is_listed() -> None:
    top = {argv[0] for argv, _ in COMMANDS}
    assert {"asm", "sim", "verilog", "synth", "build", "compile", "run", "tune",
            "explore"} <= top


@pytest.mark.parametrize("argv", [a for a, _ in COMMANDS], ids=" ".join)
def test_help_renders(argv: list[str], capsys) -> None:
    parser = dict((tuple(a), p) for a, p in COMMANDS)[tuple(argv)]
    with pytest.raises(SystemExit) as e:  # argparse's --help exits 0 from parse_args
        build_parser().parse_args([*argv, "--help"])
    assert e.value.code == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith(f"usage: vta {' '.join(argv)}")
    for action in parser._actions:
        for flag in action.option_strings:
            assert flag in out, (argv, flag)
    assert main([*argv, "--help"]) == 0  # the entry point says the same
    assert capsys.readouterr().out == out


def test_top_level_help_lists_every_command(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for argv, _ in COMMANDS:
        if len(argv) == 1:
            assert f"    {argv[0]} " in out, argv
