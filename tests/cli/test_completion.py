"""`ragtui completion bash|zsh|fish`: scripts generated from the parser, completing in a real bash."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ragtui import cli
from ragtui.commands import COMMANDS

BASH = shutil.which("bash")


def _script(capsys, shell: str) -> str:
    assert cli.main(["completion", shell]) == 0
    return capsys.readouterr().out


def _complete(script: str, words: list[str], cwd) -> list[str]:
    """What bash's completion offers for the last of ``words`` (the line typed so far, split)."""
    array = " ".join(f"'{w}'" for w in words)
    program = (f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}\n"
               "_ragtui; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    result = subprocess.run([BASH, "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                            cwd=cwd, timeout=60)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_completes_commands_options_and_values(capsys, tmp_path):
    script = _script(capsys, "bash")
    assert _complete(script, ["ragtui", "se"], tmp_path) == ["search"]
    assert set(_complete(script, ["ragtui", ""], tmp_path)) >= set(COMMANDS)
    assert _complete(script, ["ragtui", "search", "--mo"], tmp_path) == ["--mode"]
    from ragtui.core.search.modes import MODES
    from ragtui.core.search.ranking_options import CHOICES

    # The values come from the mode table and the option ranges, in their order.
    assert _complete(script, ["ragtui", "search", "--mode", "bm"], tmp_path) == [m for m in MODES if m.startswith("bm")]
    assert "bm25stem" in MODES and _complete(script, ["ragtui", "search", "--mode", "bm25s"], tmp_path) == ["bm25stem"]
    assert sorted(_complete(script, ["ragtui", "search", "--fusion", ""], tmp_path)) == sorted(CHOICES["fusion"])
    assert _complete(script, ["ragtui", "completion", ""], tmp_path) == ["bash", "zsh", "fish"]
    (tmp_path / "notes").mkdir()
    assert _complete(script, ["ragtui", "--artifacts", "no"], tmp_path) == ["notes"]
    assert _complete(script, ["ragtui", "ingest", "no"], tmp_path) == ["notes"]  # a positional: file names


def test_zsh_uses_the_bash_function_through_bashcompinit(capsys):
    bash, zsh = _script(capsys, "bash"), _script(capsys, "zsh")
    assert "bashcompinit" in zsh and "bashcompinit" not in bash
    assert zsh.split("\n", 2)[2] == bash.split("\n", 1)[1]  # the same function after the zsh preamble


def test_fish_names_every_command_with_its_help(capsys):
    fish = _script(capsys, "fish")
    for name, line in COMMANDS.items():
        assert f"-a {name} -d " in fish and line.split()[0] in fish
    from ragtui.core.search.modes import MODES

    assert f"complete -c ragtui -n '__fish_seen_subcommand_from search' -l mode -x -a '{' '.join(MODES)}'" in fish


def test_an_unknown_shell_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["completion", "tcsh"])
    assert exit_.value.code == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err
