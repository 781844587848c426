"""Stand-ins for the head's Slurm and systemd commands, for gb300-heal run as a real process.

Run as ``python fake_head.py <command> <args...>`` (a wrapper per command on PATH). State lives in the JSON file
``$FAKE_HEAD_STATE``: nodes (state words, reason, boot time, Extra, comment), jobs per node, reservations, and
every command line seen. ``scontrol --json show node`` answers in Slurm 25.11's shape (``nodes[].name``,
``state`` a list, ``reason``, ``boot_time`` as ``{"set", "infinite", "number"}``, ``extra``, ``comment``).
``scontrol --json show job`` answers with the jobs of ``slurm_jobs`` in the shape of Slurm's data_parser
(``jobs[].job_id``, ``nodes`` a hostlist, ``job_state`` a list, ``start_time``/``end_time`` as
``{"set", "infinite", "number"}``), as slurmrestd 24.05's ``/slurm/v0.0.41/job`` records show them
(rackslab/Slurm-web slurmweb/tests/assets/slurmrestd/24.05; 25.11's own output not read).
``systemd-run`` runs nothing: it writes the rack run's output (``$FAKE_NCCL_OUTPUT``, an nccl-tests recording) to
the unit's ``StandardOutput=file:`` path, as the finished unit would have.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from standin import hostlist  # the stand-ins' one hostlist parser (tests/support/standin.py)


def main() -> int:  # noqa: PLR0912 - one branch per command line the loop sends
    path = Path(os.environ["FAKE_HEAD_STATE"])
    state: dict[str, Any] = json.loads(path.read_text())
    cmd, args = Path(sys.argv[1]).name, sys.argv[2:]
    state.setdefault("calls", []).append([cmd, *args])
    code = 0
    if cmd == "scontrol" and args[:3] == ["--json", "show", "node"]:
        wanted = hostlist(args[3]) if len(args) > 3 else sorted(state["nodes"])
        nodes = []
        for name in wanted:
            node = state["nodes"].get(name)
            if node is None:
                continue
            nodes.append(
                {
                    "name": name,
                    "state": node["state"],
                    "reason": node.get("reason", ""),
                    "boot_time": {"set": True, "infinite": False, "number": node.get("boot_time", 0)},
                    "extra": node.get("extra", ""),
                    "comment": node.get("comment", ""),
                }
            )
        print(json.dumps({"nodes": nodes}))
    elif cmd == "scontrol" and args[:3] == ["--json", "show", "job"]:

        def stamp(value: float | None) -> dict[str, Any]:
            return {"set": value is not None, "infinite": False, "number": int(value or 0)}

        jobs = [
            {
                "job_id": int(job["id"]),
                "nodes": job["nodes"],
                "job_state": [job["state"]],
                "start_time": stamp(job.get("start")),
                "end_time": stamp(job.get("end")),
            }
            for job in state.get("slurm_jobs", [])
        ]
        print(json.dumps({"jobs": jobs, "last_backfill": stamp(None), "last_update": stamp(None)}))
    elif cmd == "scontrol" and args[0] == "update":
        opts = dict(a.split("=", 1) for a in args[1:])
        for name in hostlist(opts["nodename"]):
            node = state["nodes"][name]
            words = [w for w in node["state"] if w != "DRAIN"]
            if opts.get("state") == "drain":
                node["state"], node["reason"] = [*words, "DRAIN"], opts.get("reason", "")
            elif opts.get("state") == "resume":
                node["state"], node["reason"] = words, ""
            if "comment" in opts:
                node["comment"] = opts["comment"]
    elif cmd == "scontrol" and args[:2] == ["create", "reservation"]:
        opts = dict(a.split("=", 1) for a in args[2:])
        state.setdefault("reservations", {})[opts["reservationname"]] = opts
    elif cmd == "scontrol" and args[0] == "delete":
        state.setdefault("reservations", {}).pop(args[1].split("=", 1)[1], None)
    elif cmd == "scontrol" and args[0] == "requeue":
        pass
    elif cmd == "squeue":
        hosts = hostlist(next(a for a in args if a.startswith("--nodelist=")).split("=", 1)[1])
        for host in hosts:
            for job in state.get("jobs", {}).get(host, []):
                print(job)
    elif cmd == "systemd-run":
        output = next(a for a in args if a.startswith("--property=StandardOutput=file:")).split("file:", 1)[1]
        Path(output).write_text(Path(os.environ["FAKE_NCCL_OUTPUT"]).read_text())
    elif cmd == "systemctl" and args[:1] == ["is-active"]:
        print("inactive")
        code = 3
    else:
        print(f"fake_head: unexpected {cmd} {args}", file=sys.stderr)
        code = 2
    path.write_text(json.dumps(state, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
