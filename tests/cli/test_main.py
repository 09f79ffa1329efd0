"""The entry point: a bad flag is one line naming it, exit 2 — not a screen of usage."""

import pytest

from servelab.cli import main


@pytest.mark.parametrize("argv, says", [
    (["serve", "--engine", "tgi"], "servelab serve: error: argument --engine: invalid choice: 'tgi'"),
    (["bench", "--num-prompts", "x"], "servelab bench: error: argument --num-prompts: invalid int value: 'x'"),
    (["study", "runn", "x.toml"], "servelab study: error: argument ACTION: invalid choice: 'runn'"),
    (["nope"], "servelab: error: argument COMMAND: invalid choice: 'nope'"),
])
def test_a_bad_flag_is_one_line_naming_it(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.startswith(says) and err.rstrip().endswith("--help)")


@pytest.mark.parametrize("command", ["sweep", "tune", "scale"])
def test_help_shows_the_commands_own_options_first_and_benchs_under_one_heading(command, capsys):
    """Issue 19 item 14: ~460 lines of --help with the command's own options last."""
    with pytest.raises(SystemExit):
        main.main([command, "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"usage: servelab {command} [{command.upper()} OPTIONS] [BENCH WORKLOAD FLAGS] [-- ENGINE ARGS]"
    own = lines.index(f"{command}:")
    heading = next(i for i, line in enumerate(lines) if line.startswith("bench workload flags — `servelab bench`'s"))
    assert own < 6 and own < lines.index("results:") < heading < lines.index("dataset options:")
    assert lines.index("engine (default: the embedded vLLM CPU engine):") < heading


def test_tunes_loads_help_promises_no_ladder(capsys):
    with pytest.raises(SystemExit):
        main.main(["tune", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the loads each config is measured at (default: the one load the workload's" in out
    assert "geometric ladder" not in out


def _parsers(parser):
    """A parser and every subcommand parser under it (study run, results recover, data inspect…)."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


@pytest.mark.parametrize("command", list(main.COMMANDS))
def test_no_parser_matches_a_prefix(command):
    """Issue 34 item 16: `--gpu A40` on sweep was read as --gpu-hour-cost. Every command's parser
    and each of its subcommands' refuses abbreviations."""
    import importlib

    parser = main.Parser(prog=f"servelab {command}")
    importlib.import_module(main.COMMANDS[command][0]).add_arguments(parser)
    walked = list(_parsers(parser))
    assert walked and all(p.allow_abbrev is False for p in walked), [p.prog for p in walked if p.allow_abbrev]
    assert main._top_parser().allow_abbrev is False


def test_every_parser_made_in_the_package_refuses_prefixes():
    """The parsers outside the CLI's (a study's bench flags, the simulated engine's, the plan a
    sim engine is made from, the engines' own mains, the bench/ and tools/ scripts) are made
    with allow_abbrev=False too."""
    import re
    from pathlib import Path

    import servelab

    root = Path(servelab.__file__).parents[2]  # the package, and the bench/ and tools/ scripts
    files = [path for folder in (root / "src", root / "bench", root / "tools") for path in folder.rglob("*.py")]
    made = [(path.name, line) for path in files for line in path.read_text().splitlines()
            if re.search(r"ArgumentParser\(", line)]
    assert len(made) >= 20
    assert [m for m in made if "allow_abbrev=False" not in m[1]] == []


@pytest.mark.parametrize("command", ["sweep", "optimize", "scale"])
def test_gpu_is_not_taken_for_gpu_hour_cost(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main([command, "--gpu", "A40", "--results", str(tmp_path)])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --gpu" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_library_parsers_refuse_a_prefix():
    from servelab.errors import InputError
    from servelab.flags.bench_serve import parse_bench_argv
    from servelab.sim.options import engine_from_flags

    with pytest.raises(InputError, match="--num-prom"):
        parse_bench_argv(["--num-prom", "5"])
    with pytest.raises(InputError, match="--max-num-se"):
        engine_from_flags(flags=["--max-num-se", "4"])


def test_a_long_usage_is_one_short_line(capsys):
    """Issue 34 item 16: `bench --help` opened with ~107 lines of usage."""
    with pytest.raises(SystemExit):
        main.main(["bench", "--help"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "usage: servelab bench [OPTIONS]" and out[1] == ""
    with pytest.raises(SystemExit):
        main.main(["diagnose", "--help"])  # a short usage stays argparse's own, positionals and all
    assert capsys.readouterr().out.startswith("usage: servelab diagnose [-h]")


@pytest.mark.parametrize("command", ["sweep", "scale"])
def test_simulate_is_not_offered_where_it_is_refused(command, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main.main([command, "--help"])
    out = capsys.readouterr().out
    assert "--simulate " not in out and "--sim-max-num-seqs" not in out
    for flags, named in ((["--simulate"], "--simulate"), (["--sim-max-num-seqs", "4"], "--sim-max-num-seqs"),
                         (["--sim-no-enable-prefix-caching"], "--sim-no-enable-prefix-caching")):
        assert main.main([command, "--results", str(tmp_path), *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{named} " in err[0], err


def test_optimize_says_what_simulate_means_to_it_and_has_one_results_group(capsys):
    with pytest.raises(SystemExit):
        main.main(["optimize", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert lines.count("results:") == 1
    simulate = " ".join(lines[next(i for i, s in enumerate(lines) if s.startswith("  --simulate ")):][:3])
    assert "with --engine sim" in simulate


def test_recover_with_nothing_to_recover_fails_in_one_line(tmp_path, capsys):
    """Issue 34 item 16: it exited 0, so a script could not tell."""
    assert main.main(["results", "recover", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert out.out == f"servelab: nothing to recover in {tmp_path} (no records left by a killed run)\n"
    assert out.err == ""


def test_num_prompts_is_checked_before_any_server_is_asked(capsys):
    """Issue 34 item 16: `--num-prompts -1` was refused only after contacting the server (here:
    none listens, so the old order said the server could not be reached)."""
    assert main.main(["bench", "--base-url", "http://127.0.0.1:9", "--num-prompts", "-1", "--dataset-name",
                      "random", "--disable-tqdm", "--no-telemetry"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["servelab: error: --num-prompts must be >= 1, got -1"]


def test_num_prompts_below_one_still_means_every_line_of_a_custom_file():
    from servelab.spec_checks import check_num_prompts

    check_num_prompts("custom", -1)  # vLLM's reading: every line
    with pytest.raises(Exception, match="--num-prompts must be >= 1, got 0"):
        check_num_prompts("sharegpt", 0)
