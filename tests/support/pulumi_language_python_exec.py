"""Stand-in for ``pulumi-language-python-exec``, which ships with the Pulumi CLI (not with the ``pulumi`` wheel).

:mod:`tests.support.language_host` runs this only where no CLI is installed. It takes the arguments the language
host passes (pulumi/pulumi ``sdk/python/cmd/pulumi-language-python/main.go`` ``constructArguments``) and does what
pulumi/pulumi ``sdk/python/cmd/pulumi-language-python-exec`` does, step by step, written here from that
description:

1. the SDK's config from ``PULUMI_CONFIG`` and ``PULUMI_CONFIG_SECRET_KEYS`` (``set_all_config``);
2. ``pulumi.runtime.configure`` with monitor, engine, project, stack, parallel, dry run, organization and root
   directory from the arguments;
3. ``sys.argv`` set to the program and its arguments, then ``chdir`` to ``--pwd``;
4. a new event loop whose default executor has ``4 * max(parallel, 1)`` threads;
5. ``run_in_stack`` of ``runpy.run_path(PROGRAM, run_name="__main__")``; a directory without ``__main__.py`` logs
   "unable to find main python program `__main__.py` in `<path>`" and exits 32;
6. a ``pulumi.RunError`` is logged to the engine as an error and exits 1; any other exception is logged as
   "Program failed with an unhandled exception:" with the traceback, and exits 32.

What it cannot show: differences between this and the real script of a given CLI release (the real one is used
whenever a CLI is on PATH); the traceback trimming to the user's frames.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import runpy
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pulumi
import pulumi.runtime

EXITED_AFTER_MESSAGE = 32


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Execute a Pulumi Python program (test stand-in)")
    for name in ("project", "root_directory", "stack", "parallel", "dry_run", "pwd", "monitor", "engine", "tracing"):
        parser.add_argument(f"--{name}")
    parser.add_argument("--organization")
    parser.add_argument("PROGRAM")
    parser.add_argument("ARGS", nargs="*")
    return parser.parse_args()


def _missing_main(program: str, exc: ImportError) -> bool:
    """runpy's own ImportError for a directory without ``__main__.py`` (no frame of the program in its traceback)."""
    here = str(Path(__file__).resolve())
    frames = {str(Path(f.filename).resolve()) for f in traceback.extract_tb(exc.__traceback__)}
    folder = Path(program)
    return folder.is_dir() and not (folder / "__main__.py").is_file() and all("runpy" in f or f == here for f in frames)


def main() -> int:
    args = _arguments()
    pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
    settings = pulumi.runtime.Settings(
        monitor=args.monitor,
        engine=args.engine,
        project=args.project,
        stack=args.stack,
        parallel=int(args.parallel),
        dry_run=args.dry_run == "true",
        organization=args.organization,
        root_directory=args.root_directory,
    )
    pulumi.runtime.configure(settings)
    sys.argv = [args.PROGRAM, *args.ARGS]
    if args.pwd is not None:
        os.chdir(args.pwd)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor = ThreadPoolExecutor(max_workers=max(settings.parallel or 1, 1) * 4)
    loop.set_default_executor(executor)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    program = str(Path(args.PROGRAM).absolute())
    code = 1

    def run() -> None:
        try:
            runpy.run_path(args.PROGRAM, run_name="__main__")
        except ImportError as exc:
            if _missing_main(args.PROGRAM, exc):
                pulumi.log.error(f"unable to find main python program `__main__.py` in `{program}`")
                sys.exit(EXITED_AFTER_MESSAGE)
            raise

    try:
        loop.run_until_complete(pulumi.runtime.run_in_stack(run))
        code = 0
    except pulumi.RunError as exc:
        pulumi.log.error(str(exc))
    except Exception:  # noqa: BLE001 - the real script catches every exception here too
        pulumi.log.error("Program failed with an unhandled exception:\n" + traceback.format_exc())
        code = EXITED_AFTER_MESSAGE
    finally:
        executor.shutdown(wait=True)
        loop.close()
        sys.stdout.flush()
        sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
