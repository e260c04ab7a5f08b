"""A run of one command builds that command's parser alone; help, usage, errors and parsed arguments stay those
of the full parser."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io

import pytest

from tui.cli import core
from tui.cli.core import BUILT_IN, COMMAND_MODULES, COMMAND_NAMES, build_parser, command_of, main, parse


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return dict(action.choices)


def test_every_command_is_named_with_the_module_that_registers_it() -> None:
    assert set(_choices(build_parser())) == set(COMMAND_NAMES) | set(BUILT_IN)
    for module in COMMAND_MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub, core._add_location)  # noqa: SLF001
        assert {name for name, mod in COMMAND_NAMES.items() if mod == module} == set(sub.choices), module


@pytest.mark.parametrize(("argv", "name"), [
    (["deliveries", "--json"], "deliveries"),
    (["--dir", "/tmp/x", "deliveries"], "deliveries"),
    (["--dir", "deliveries", "runs"], "runs"),
    (["--di", "deliveries", "list"], "list"),
    (["--dir=/tmp/x", "--read-only", "deliveries"], "deliveries"),
    (["--store", "runs", "show", "abcd"], "show"),
    (["--", "deliveries"], "deliveries"),
    (["deliveries", "--help"], None),
    (["deliveries", "--he"], None),
    (["-h"], None),
    ([], None),
    (["--dir", "/tmp/x"], None),
    (["bogus"], None),
])
def test_the_command_of_an_argument_list(argv: list[str], name: str | None) -> None:
    assert command_of(argv) == name


ARGVS = [
    ["deliveries", "--json"],
    ["--dir", "/tmp/x", "deliveries", "--csv", "--session", "s1", "--limit", "5"],
    ["deliveries", "--dir", "/tmp/y", "--snapshot"],
    ["--read-only", "runs", "--orphaned", "--limit", "0"],
    ["repair", "retry-delivery", "dop1", "--dry-run", "--json"],
    ["repair", "recover-run", "r1", "--user-stop", "--yes"],
    ["list", "--json", "--limit", "3", "--sort", "title"],
    ["show", "abcd", "--format", "json"],
    ["demo"],
    ["simulate-deliveries", "--outcome", "transient", "--exit-when-idle"],
    ["kb", "list"],
    ["doctor"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) for a in ARGVS])
def test_one_commands_parser_parses_as_the_full_one(argv: list[str]) -> None:
    parser, args = parse(argv)
    assert len(_choices(parser)) < len(_choices(build_parser()))  # only that command's module was registered
    assert vars(args) == vars(build_parser().parse_args(argv))


def _run(argv: list[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def _full(argv: list[str]) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            build_parser().parse_args(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, stdout.getvalue(), stderr.getvalue()


HELP_AND_ERRORS = [
    ["--help"], ["-h"], ["--dir", "/tmp/x", "--help"], ["bogus"], ["--dir"],
    *[[name, "--help"] for name in (*BUILT_IN, *COMMAND_NAMES)],
    ["repair", "retry-delivery", "--help"], ["deliveries", "-h"],
    ["deliveries", "--bogus"], ["deliveries", "--limit", "x"], ["deliveries", "--limit", "-1"], ["--bogus", "deliveries"],
    ["deliveries", "--json", "--csv"], ["repair"], ["repair", "nope"], ["repair", "retry-delivery"],
    ["kb", "--nope"], ["runs", "--read-only", "--snapshot", "--bogus"], ["show"],
]


@pytest.mark.parametrize("argv", HELP_AND_ERRORS, ids=[" ".join(a) for a in HELP_AND_ERRORS])
def test_help_usage_and_errors_are_the_full_parsers(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = _run(argv)
    assert (code, out, err) == _full(argv)
    assert code in (0, 2) and (out or err)
