import subprocess

import pytest

from commands import cli


def test_timewarp_without_command_prints_usage_and_fails(python, subprocess_env):
    proc = subprocess.run(
        [python, "-m", "timewarp"], env=subprocess_env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "usage: timewarp" in proc.stderr


def test_unknown_command_is_rejected_by_name(python, subprocess_env):
    proc = subprocess.run(
        [python, "-m", "timewarp", "frobnicate"], env=subprocess_env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "frobnicate" in proc.stderr


def test_version(python, subprocess_env):
    proc = subprocess.run(
        [python, "-m", "timewarp", "--version"], env=subprocess_env, capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("timewarp ")


# --- usage errors: one line naming the mistake (issue 15 item 14) --------------------

EXAMPLES = "examples/inputs"


def usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" not in err and len(err.splitlines()) <= 2, err
    return err.splitlines()[0]


def test_a_misspelled_option_is_named_with_the_option_meant(capsys):
    # the typo also makes the required --scheduler "missing": the typo is what to report
    line = usage_error(capsys, ["simulate", "--schedular", "x", "-p", "a", "-w", "b", "-o", "c"])
    assert line == "timewarp simulate: error: unrecognised --schedular (did you mean --scheduler?)"


def test_a_misspelled_option_of_a_tool_names_the_tool(capsys):
    line = usage_error(capsys, ["workload", "burst", "-n", "3", "--dely", "4", "-o", "x"])
    assert line == "timewarp workload burst: error: unrecognised --dely (did you mean --delay?)"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--standalone", "--", "python", "prog.py", "--not-ours"],  # the program's
        ["simulate", "--scheduler", "python s.py --schedular-name x", "-p", "a", "-w", "b"],
    ],
)
def test_options_meant_for_the_program_are_not_taken_for_typos(capsys, argv):
    from commands.parsing import unknown_options

    parser = cli.CommandParser(prog="timewarp x")
    module = __import__(cli.SUBCOMMANDS[argv[0]][0], fromlist=["add_arguments"])
    module.add_arguments(parser)
    assert unknown_options(parser, argv[1:]) == []


def test_a_missing_option_is_one_line_too(capsys):
    line = usage_error(capsys, ["simulate", "-p", "a"])
    assert line.startswith("timewarp simulate: error: the following arguments are required:")


def test_an_unknown_command_suggests_the_close_one(capsys):
    line = usage_error(capsys, ["simulat"])
    assert line.startswith("timewarp: error: unknown command 'simulat' (did you mean simulate?)")


@pytest.mark.parametrize("command", ["simulate", "sim"])
def test_swapped_platform_and_workload_are_called_swapped(capsys, tmp_path, command):
    argv = [command, "-p", f"{EXAMPLES}/burst_40_delay170.json", "-w", f"{EXAMPLES}/cluster16.xml"]
    argv += ["--scheduler", "x", "-o", str(tmp_path)] if command == "simulate" else ["-q"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "looks like a workload (JSON), not a platform" in err
    assert "(-p and -w swapped?)" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


# --- help: every option says what it takes, its unit and its default (issue 15 item 13) -


def all_parsers():
    import argparse

    for name, (module_name, _) in cli.SUBCOMMANDS.items():
        parser = cli.CommandParser(prog=f"timewarp {name}")
        __import__(module_name, fromlist=["add_arguments"]).add_arguments(parser)
        stack = [parser]
        while stack:
            p = stack.pop()
            yield p
            for action in p._actions:
                if isinstance(action, argparse._SubParsersAction):
                    stack.extend(action.choices.values())


def options():
    import argparse

    for parser in all_parsers():
        for action in parser._actions:
            if action.option_strings and not isinstance(
                action, (argparse._HelpAction, argparse._VersionAction)
            ):
                yield parser.prog, action


def test_every_option_has_help_with_its_default_and_repeatable_ones_say_so():
    import argparse

    missing, no_default, not_repeatable = [], [], []
    for prog, action in options():
        flag = f"{prog} {'/'.join(action.option_strings)}"
        text = action.help or ""
        if not text or text == argparse.SUPPRESS:
            missing.append(flag)
            continue
        takes_value = action.nargs != 0
        if takes_value and action.default not in (None, [], argparse.SUPPRESS):
            if "default" not in text:
                no_default.append(flag)
        if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
            not_repeatable.append(flag)
    assert missing == [] and no_default == [] and not_repeatable == []


def test_quiet_means_the_same_in_every_command():
    helps = {prog: action.help for prog, action in options() if "-q" in action.option_strings}
    assert set(helps) >= {"timewarp simulate", "timewarp sim", "timewarp run", "timewarp sweep"}
    for prog, text in helps.items():
        assert text.startswith("print only warnings and errors"), prog
