"""``xferaudit run [-o RUN.json] SCRIPT [ARGS...]`` / ``xferaudit run [-o RUN.json] -m MODULE [ARGS...]``.

Runs an unmodified program in this process, as ``python SCRIPT ARGS`` would,
with counting and the guard on for the whole run
(:mod:`xferaudit.runtime.runs.runner`): every crossing, wrapped or not, is
attributed to the user's line. At the end the report is printed to stderr and
the run file written (default ``xferaudit-run.json``; under ``torchrun`` one
per rank, the rank in its name).

Everything after SCRIPT (or after ``-m MODULE``) is the program's, options
included. The exit code is the program's own; 2 when the program cannot be
started (no such file or module, a folder for the run file that does not
exist, a budget that cannot be read) or when it exited 0 but the run file
could not be written; 1 when it exited 0 but broke the budget given with
``--budget B.toml`` (or by ``run-budget`` in ``[tool.xferaudit]``), each site
over its allowance and each new one named on stderr, with what to do and the
commands (also when it ended in ``os.execv``: the exec is then not made); 2
when a budget was given but the program found no GPU (nothing could cross, so
the budget cannot be judged).

``--simulate`` (or ``XFERAUDIT_SIMULATE=1``) runs a program written for
CUDA on the simulated device (:mod:`xferaudit.simulate`): a CI machine
without a GPU counts the crossings the program makes on one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Optional

from . import EXIT_ERROR, EXIT_FINDINGS, Command, UserError


class RunCommand(Command):
    NAME = "run"
    DESCRIPTION = ("Run an unmodified program (SCRIPT or -m MODULE) with counting and the guard on; "
                   "print the report and write the run file.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.usage = ("xferaudit run [-h] [-o RUN.json] [-q] [--guard-mode {auto,lite,full}]\n"
                        "                     [--ranges] [--simulate] [--budget B.toml | --no-budget]\n"
                        "                     (SCRIPT [ARGS...] | -m MODULE [ARGS...])")
        parser.add_argument("-o", "--output", metavar="RUN.json", default=None,
                            help="the run file (default xferaudit-run.json; under torchrun the rank "
                                 "goes into the name: xferaudit-run.rank0.json)")
        parser.add_argument("-q", "--quiet", action="store_true",
                            help="do not print the report (the run file is still written)")
        parser.add_argument("--guard-mode", choices=("auto", "lite", "full"), default=None,
                            help="the guard's mode (default: $XFERAUDIT_GUARD_MODE, else auto: "
                                 "lite on a CUDA machine, full elsewhere)")
        parser.add_argument("--ranges", action="store_true",
                            help="run each wrapped call inside a torch.profiler and an NVTX range "
                                 "named by its site (as XFERAUDIT_RANGES=1 does)")
        parser.add_argument("--simulate", action="store_true",
                            help="run a program written for CUDA, unmodified, on the simulated device "
                                 "(no GPU needed): its CUDA devices are the simulated one, and every "
                                 "crossing is counted as on a GPU (as XFERAUDIT_SIMULATE=1 does)")
        parser.add_argument("--budget", metavar="B.toml", default=None,
                            help="check the run against this budget (`xferaudit budget --from RUN.json` "
                                 "writes one): exit 1 naming each site over it and each new one "
                                 "(default: run-budget in [tool.xferaudit], if set)")
        parser.add_argument("--no-budget", action="store_true",
                            help="do not check the run-budget of [tool.xferaudit]")
        parser.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE ...",
                            help="run a module as `python -m MODULE ARGS` would")
        parser.add_argument("program", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                            help="the script and its arguments, as `python SCRIPT ARGS`")

    def run(self, args: argparse.Namespace) -> int:
        from ..runtime.runs.runner import DEFAULT_OUTPUT, RunError, output_problem, run_module, run_path

        module = args.module
        if args.program[:1] == ["--"]:  # `xferaudit run -q -- script.py`: the script follows
            args.program = args.program[1:]
        if module is not None and args.program:
            raise UserError("give a SCRIPT or -m MODULE, not both")
        if module is not None and not module:
            raise UserError("-m needs a MODULE")
        if module is None and not args.program:
            raise UserError("name the program to run: xferaudit run SCRIPT [ARGS...] "
                            "or xferaudit run -m MODULE [ARGS...]")
        output = args.output if args.output is not None else DEFAULT_OUTPUT
        problem = output_problem(output)  # (checked now: not after an hour of counting)
        if problem:
            raise UserError(problem)
        budget = _budget(args, args.program[0] if module is None else None)
        whole = bool(getattr(args, "_whole_process", False))
        from ..runtime.counted.ranges import ENV

        before = os.environ.get(ENV)
        if args.ranges:  # read when the run starts counting (and by the program's own xfer.count)
            os.environ[ENV] = "1"
        from .. import simulate

        if simulate.requested(args.simulate):  # (set up once the program's `import torch` has run)
            simulate.when_torch_imported()
        try:
            if module is not None:
                res = run_module(module[0], module[1:], output, args.quiet, args.guard_mode, budget,
                                 whole_process=whole)
            else:
                res = run_path(args.program[0], args.program[1:], output, args.quiet, args.guard_mode,
                               budget, whole_process=whole)
        except RunError as e:
            raise UserError(str(e)) from None
        finally:
            if args.ranges:
                if before is None:
                    os.environ.pop(ENV, None)
                else:
                    os.environ[ENV] = before
        if res.error and res.exit_code == 0:
            return EXIT_ERROR  # (the message is printed: the run file is what was asked for)
        if res.interrupted:  # end as Python ends on Ctrl-C: killed by SIGINT
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, OSError, ValueError):  # (None, or closed by the program)
                    pass
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        if res.exit_code == 0 and res.problems:
            from ..runtime.runs.no_device import NoDevice

            return EXIT_ERROR if isinstance(res.problems[0], NoDevice) else EXIT_FINDINGS
        return res.exit_code


def _budget(args: argparse.Namespace, script: Optional[str]):
    """The budget to check the run against: ``--budget``, else the project's
    ``run-budget`` (found from the script's folder, else the working
    directory), else None. Read before the program runs: a budget that cannot
    be read is an error (exit 2), never a run that cannot be judged."""
    from ..runtime.runs.budget import BudgetError, load_budget

    if args.budget is not None and args.no_budget:
        raise UserError("give --budget or --no-budget, not both")
    try:
        if args.budget is not None:
            return load_budget(args.budget)
        if args.no_budget:
            return None
        from pathlib import Path

        from ..config import ConfigError, load_config

        start = Path(os.path.dirname(os.path.abspath(script))) if script else Path.cwd()
        try:
            cfg = load_config(start)
        except ConfigError as e:
            raise UserError(str(e)) from None
        if cfg.run_budget is None:
            return None
        if cfg.run_budget is True:
            from ..runtime.runs.budget import budget_from_mapping

            if "budget" not in cfg.raw:  # (an empty table is a budget: nothing may cross)
                raise UserError(f"{cfg.source}: run-budget = true, but there is no [tool.xferaudit.budget] "
                                "table")
            return budget_from_mapping(cfg.budget, f"{cfg.source}: [tool.xferaudit.budget]")
        return load_budget(cfg.run_budget)
    except BudgetError as e:
        raise UserError(str(e)) from None


COMMAND = RunCommand
