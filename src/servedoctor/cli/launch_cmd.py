"""``servedoctor launch -- CMD``: bring a server up under supervision and smoke-test it."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from servedoctor.cli.app import app, err, out
from servedoctor.config import (
    config_env,
    default_grace,
    default_request_timeout,
    default_runs_dir,
    default_startup_timeout,
    default_store,
)
from servedoctor.env.serverenv import ServerPython, resolve_python
from servedoctor.errors import UserError
from servedoctor.taxonomy import PHASES

if TYPE_CHECKING:
    from servedoctor.experiments.envhistory import Remembered
    from servedoctor.launch.types import RunResult

EXIT_HEALTHY, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def parse_stall_timeouts(items: list[str]) -> dict[str, float]:
    """``PHASE=SECONDS`` items → mapping; ``all=S`` sets every phase."""
    result: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not sep or seconds <= 0:
            raise UserError(f"--stall-timeout wants PHASE=SECONDS, got {item!r}")
        if name == "all":
            result.update(dict.fromkeys(PHASES, seconds))
        elif name in PHASES:
            result[name] = seconds
        else:
            raise UserError(f"--stall-timeout: unknown phase {name!r}; phases: {', '.join(PHASES)}")
    return result


def parse_env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--env wants NAME=VALUE, got {item!r}")
        env[name] = value
    return env


@app.command("launch")
def launch_cmd(
    command: list[str] = typer.Argument(None, help="the server command, after --"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON object at the end"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no live display"),
    prompt: str = typer.Option("Say hello in one sentence.", help="smoke-test prompt"),
    max_tokens: int = typer.Option(16, min=1, help="smoke-test max_tokens"),
    request_timeout: float = typer.Option(
        ...,
        "--request-timeout",
        default_factory=default_request_timeout,
        help="seconds a generation request may take (default: config file, else 60)",
    ),
    expect: str | None = typer.Option(None, help="regex the smoke reply must match"),
    detach: bool = typer.Option(
        False, "--detach", help="after a healthy smoke test, leave the server running and return"
    ),
    keep_running: bool = typer.Option(False, "--keep-running", hidden=True),  # old --detach
    exit_after_smoke: bool = typer.Option(
        False,
        "--exit-after-smoke",
        help="after the smoke test, stop the server and return (scripts, CI)",
    ),
    probe_every: float = typer.Option(
        30.0,
        "--probe-every",
        min=0,
        help="attached: seconds between generation probes (0: only process, log and port)",
    ),
    stall_timeout: list[str] = typer.Option(
        [], "--stall-timeout", help="PHASE=SECONDS with no log line or probe answer → hang"
    ),
    startup_timeout: float | None = typer.Option(
        ...,
        "--startup-timeout",
        default_factory=default_startup_timeout,
        help="seconds to become ready (default: config file, else no limit)",
    ),
    runs_dir: Path = typer.Option(
        ...,
        "--runs-dir",
        default_factory=default_runs_dir,
        help="where run directories go (default: $SERVEDOCTOR_RUNS_DIR, the config file, "
        "else ~/.local/state/servedoctor/runs)",
    ),
    env: list[str] = typer.Option(
        [], "--env", help="NAME=VALUE for the server's environment (over the config file's env)"
    ),
    grace: float = typer.Option(
        ...,
        "--grace",
        default_factory=default_grace,
        help="seconds between SIGTERM and SIGKILL on teardown (default: config file, else 10)",
    ),
    no_report: bool = typer.Option(
        False, "--no-report", help="do not write the run's HTML report (report.html)"
    ),
    on: str | None = typer.Option(
        None, "--on", help="run CMD on a remote host through ssh: ssh://[user@]host[:port]"
    ),
    store: str | None = typer.Option(
        ...,
        "--store",
        default_factory=default_store,
        help="findings store (path or URL) where a healthy launch records the server's "
        "packages and a failed one is compared with them (default: as fix)",
    ),
    python_path: Path | None = typer.Option(
        None, "--python", help="the server's Python (default: the one the command runs)"
    ),
    nodes: str | None = typer.Option(
        None,
        "--nodes",
        metavar="HOST,HOST",
        help="a multi-node launch over ssh (SGLang: --nnodes/--node-rank/--dist-init-addr "
        "per node; vLLM: a Ray cluster, then vllm serve on the first host)",
    ),
) -> None:
    """Launch CMD, follow its phases, smoke-test it, and diagnose it if it fails.

    After a healthy smoke test it stays attached: it keeps watching the process, its log and
    its port, probes it every --probe-every seconds, and diagnoses a later failure in place;
    Ctrl-C stops the whole server tree (the log is kept). --detach leaves the server running
    and returns; --exit-after-smoke stops it and returns.

    Exit status: 0 healthy (also when stopped by Ctrl-C while attached and healthy),
    1 failed, 2 usage, 130 interrupted before the server was healthy.
    """
    from servedoctor.knowledge.registry import default_registry
    from servedoctor.launch import LaunchOptions, check_command, launch
    from servedoctor.launch.display import LiveDisplay, render_result
    from servedoctor.launch.stale import find_stale_runs
    from servedoctor.launch.types import DEFAULT_STALL_TIMEOUTS
    from servedoctor.remote import parse_target

    argv = list(command or [])
    if nodes is not None:
        _launch_nodes(argv, nodes, on, runs_dir, {**config_env(), **parse_env(env)}, grace,
                      startup_timeout, json_out)  # fmt: skip
    target = None if on is None else parse_target(on)
    if target is None or not argv:
        check_command(argv)  # a remote command can only be checked there
    default_registry()  # a broken rule file is one line now, before any server starts
    if expect is not None:
        try:
            re.compile(expect)
        except re.error as exc:
            raise UserError(f"--expect is not a valid regex: {exc}") from None
    stalls = {**DEFAULT_STALL_TIMEOUTS, **parse_stall_timeouts(stall_timeout)}
    detach = detach or keep_running
    if detach and exit_after_smoke:
        raise UserError("--detach and --exit-after-smoke exclude each other: choose one")
    # after the usage checks: a usage error stays the one line on stderr
    server = _server_python(argv, python_path, quiet or json_out) if target is None else None
    options = LaunchOptions(
        prompt=prompt,
        max_tokens=max_tokens,
        request_timeout=request_timeout,
        expect=expect,
        keep_running=detach,
        attach=not (detach or exit_after_smoke),
        probe_every_s=probe_every,
        runs_dir=runs_dir,
        stall_timeouts=stalls,
        startup_timeout=startup_timeout,
        env={**config_env(), **parse_env(env)},  # --env over the config file's env table
        quiet=quiet or json_out,
        grace_s=grace,
        on=target,
    )
    code = {"healthy": EXIT_HEALTHY, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}
    try:
        # the supervisor marks them abandoned (and records them in the new run.json)
        for stale in find_stale_runs(runs_dir, mark=False):
            err.print(f"[yellow]warning:[/] {escape(stale.line())}", highlight=False)
        if quiet:
            result = launch(argv, options)
        else:
            from servedoctor.experiments.durations import expected_for_argv

            expected = expected_for_argv(store, argv)
            with LiveDisplay(err, expected_s=expected) as display:
                result = launch(argv, options, on_event=display)
    except (OSError, SystemExit) as exc:  # rich: SystemExit(1) on EPIPE
        if not _output_closed(exc):
            raise
        # closed while the run ended (the supervisor already stopped the server): the
        # exit status must still say so; the result is in run.json
        _silence_output()
        raise typer.Exit(EXIT_INTERRUPTED) from None
    memory = _remember(result, argv, server, store, options.env)
    if memory is not None and memory.diagnosis is not result.diagnosis:
        result = dataclasses.replace(result, diagnosis=memory.diagnosis)
    try:
        if json_out:
            data = result.to_dict()
            if memory is not None and memory.diff is not None:
                data["since_healthy"] = memory.to_dict()
            sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        else:
            out.print(render_result(result), highlight=False, soft_wrap=True)
            for line in memory.lines() if memory is not None else []:
                out.print(line, highlight=False, soft_wrap=True, markup=False)
    except (OSError, SystemExit) as exc:  # ``| head`` closed the pipe, or the terminal is gone
        if not _output_closed(exc):
            raise
        _silence_output()
    if not no_report:
        from servedoctor.cli.report_cmd import report_after_run

        report_after_run(result.run_dir, result.diagnosis)
    raise typer.Exit(code[result.outcome])


def _launch_nodes(
    argv: list[str],
    nodes: str,
    on: str | None,
    runs_dir: Path,
    env: dict[str, str],
    grace: float,
    timeout: float | None,
    json_out: bool,
) -> None:
    """``launch --nodes``: plan, run, say which node and rank failed first; exits."""
    from servedoctor.remote.nodes import launch_nodes

    if on is not None:
        raise UserError("--nodes and --on exclude each other: --nodes names every host")
    report = launch_nodes(argv, nodes, runs_dir=runs_dir, env=env, grace_s=grace,
                          timeout_s=timeout)  # fmt: skip
    if json_out:
        sys.stdout.write(json.dumps(report.to_dict(), ensure_ascii=False) + "\n")
    else:
        for line in report.lines():
            out.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(report.exit_code)


def _server_python(argv: list[str], python: Path | None, quiet: bool) -> ServerPython:
    """The server's interpreter (a bad --python is one line), warned about when it is
    servedoctor's own."""
    server = resolve_python(argv, python)
    if (warning := server.warning()) and not quiet:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    return server


def _remember(
    result: RunResult,
    argv: list[str],
    server: ServerPython | None,
    store: str | None,
    env: Mapping[str, str],
) -> Remembered | None:
    """A healthy launch records the server's packages; a failed one is compared with the
    last healthy record (remote servers: neither)."""
    from servedoctor.experiments.envhistory import remember_run

    if server is None or result.outcome == "interrupted":
        return None
    healthy = result.outcome == "healthy" or bool(result.smoke and result.smoke.ok)
    return remember_run(
        store, argv, server.path, healthy=healthy, diagnosis=result.diagnosis, env=env
    )


def _output_closed(exc: OSError | SystemExit) -> bool:
    if isinstance(exc, SystemExit):  # rich's answer to EPIPE
        return isinstance(exc.__context__, BrokenPipeError)
    return isinstance(exc, BrokenPipeError) or exc.errno in (errno.EIO, errno.EPIPE)


def _silence_output() -> None:
    """Point stdout and stderr at /dev/null so that exiting does not write to them again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)
