"""Stand-ins for the hardware and system commands the node steps call, for the test sandbox.

Run as `python standin.py <command> <args...>` (the sandbox puts one wrapper per command on PATH).
Read-only commands print recorded real output from tests/fixtures/hw/; commands that change the
machine update the sandbox's state.json and log a `MUTATE` line, so a test can prove that a second
run changed nothing. Only the forms the node scripts use are implemented; anything else fails loudly.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

SANDBOX = Path(os.environ.get("GB300_SANDBOX", "."))
ROOT = os.environ.get("GB300_ROOT", "")
STATE_FILE = SANDBOX / "state.json"


def load() -> dict:
    return json.loads(STATE_FILE.read_text())


def save(state: dict) -> None:
    # Replace, never rewrite in place: stand-ins run at once (a step's output piped to logger while the step calls
    # others), and a reader must never see a half-written file.
    tmp = STATE_FILE.with_name(f"{STATE_FILE.name}.{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    tmp.replace(STATE_FILE)


def log_call(kind: str, argv: list[str]) -> None:
    with (SANDBOX / "calls.log").open("a") as fh:
        fh.write(f"{kind} {' '.join(argv)}\n")


def unsupported(argv: list[str]) -> int:
    sys.stderr.write(f"stand-in: unsupported call: {' '.join(argv)}\n")
    return 97


def node_path(path: str) -> str:
    return path[len(ROOT) :] if ROOT and path.startswith(ROOT) else path


def fixture(name: str) -> str:
    return (Path(load()["fixtures_dir"]) / name).read_text()


def nvidia_smi(args: list[str], state: dict) -> int:
    if args == ["-q"]:
        sys.stdout.write(fixture(state["nvidia_smi_q"]))
        return 0
    if args[:1] == ["--query-gpu=driver_version"]:
        version = state["driver_version"]
        installed = next((v for p, v in state["packages"].items() if p.startswith("nvidia-driver-")), None)
        if not version and installed:
            version = installed.split("-", 1)[0]
        if not version:
            sys.stdout.write("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
            return 9
        sys.stdout.write((version + "\n") * 4)
        return 0
    return unsupported(["nvidia-smi", *args])


def dpkg_query(args: list[str], state: dict) -> int:
    fmt = next((a[3:] for a in args if a.startswith("-f=")), "${Package}\t${Version}\n")
    pkg = args[-1]
    version = state["packages"].get(pkg)
    if version is None:
        sys.stderr.write(f"dpkg-query: no packages found matching {pkg}\n")
        return 1
    out = fmt.replace("${Status}", "install ok installed").replace("${Version}", version)
    sys.stdout.write(out.replace("${Package}", pkg).replace("\\n", "\n"))
    return 0


def upgrade(state: dict) -> None:
    """What `apt-get upgrade` and unattended-upgrades do: every installed, not held package with a newer version
    in state["available"] moves to it, and pulls in the packages state["pulls"] lists for it (a kernel meta
    package pulls its new kernel)."""
    for pkg, newer in state.get("available", {}).items():
        if pkg in state["packages"] and pkg not in state["holds"]:
            state["packages"][pkg] = newer
            for pulled, version in state.get("pulls", {}).get(pkg, {}).items():
                state["packages"][pulled] = version
    save(state)


def apt_get(args: list[str], state: dict) -> int:
    if "update" in args:
        return 0
    if "upgrade" in args or "dist-upgrade" in args:
        upgrade(state)
        return 0
    if "install" not in args:
        return unsupported(["apt-get", *args])
    for arg in args[args.index("install") + 1 :]:
        if arg.startswith("-"):
            continue
        if arg.endswith(".deb"):
            name, version = Path(arg).name.split("_")[:2]
            state["packages"][name] = version
            continue
        name, _, pattern = arg.partition("=")
        state["packages"][name] = pattern.replace("*", "1") if pattern else state["archive"].get(name, "9.9-standin")
        if name == "nvidia-imex":
            # The package ships the daemon's configuration file.
            cfg = Path(ROOT, "etc/nvidia-imex/config.cfg")
            cfg.parent.mkdir(parents=True, exist_ok=True)
            cfg.write_text((Path(state["fixtures_dir"]) / "nvidia-imex-config.cfg").read_text())
        if name.startswith("cuda-toolkit-"):
            # The toolkit package ships the compiler the source builds use.
            nvcc = Path(ROOT, "usr/local", "cuda-" + name.removeprefix("cuda-toolkit-").replace("-", "."), "bin/nvcc")
            nvcc.parent.mkdir(parents=True, exist_ok=True)
            nvcc.write_text("nvcc stand-in\n")
    save(state)
    return 0


def systemctl(args: list[str], state: dict) -> int:
    """Unit state in state["services"]; starting a oneshot unit runs its ExecStart (under the root), as systemd
    does; starting a gb300 BlobFuse2 unit mounts its container; starting slurmd registers the node with Slurm."""
    if args[0] == "reboot":
        state["reboots"] = state.get("reboots", 0) + 1
        save(state)
        return 0
    words = [a for a in args if not a.startswith("-")]
    verb, units = words[0], words[1:]
    if verb == "daemon-reload":
        return 0
    rc = 0
    for unit in units:
        name = unit.removesuffix(".service")
        svc = state["services"].setdefault(name, {"enabled": False, "active": False})
        if verb == "is-enabled":
            rc = rc or (0 if svc["enabled"] else 1)
        elif verb == "is-active":
            rc = rc or (0 if svc["active"] else 3)
        elif verb == "is-failed":
            rc = rc or (0 if svc.get("failed") else 1)
        elif verb in ("enable", "disable"):
            svc["enabled"] = verb == "enable"
            if "--now" in args:
                svc["active"] = verb == "enable"
                if verb == "enable":
                    save(state)
                    rc = rc or _started(name, state)
                    state = load()
        elif verb in ("start", "restart", "reload-or-restart"):
            started = _start(name, svc, state)
            rc = rc or started
            state = load()
        elif verb in ("stop", "mask", "unmask"):
            _stop_or_mask(svc, verb, now="--now" in args)
        else:
            return unsupported(["systemctl", *args])
    save(state)
    return rc


def _start(name: str, svc: dict, state: dict) -> int:
    if svc.get("masked"):  # systemd refuses: "Unit ... is masked."
        return 1
    svc["active"] = True
    save(state)
    return _started(name, state)


def _stop_or_mask(svc: dict, verb: str, *, now: bool) -> None:
    """``stop``; ``mask`` (gb300-pam-adopt masks systemd-logind; ``--now`` stops it too) and ``unmask``."""
    if verb == "stop" or (verb == "mask" and now):
        svc["active"] = False
    if verb != "stop":
        svc["masked"] = verb == "mask"
        svc["enabled"] = svc["enabled"] and verb == "unmask"


def _started(name: str, state: dict) -> int:
    unit = Path(ROOT, "etc/systemd/system", name if "." in name else f"{name}.service")
    if name.startswith("gb300-blobfuse2-"):
        env = Path(ROOT, "etc/gb300/blobfuse2", name.removeprefix("gb300-blobfuse2-") + ".env").read_text()
        path = env.strip().split("=", 1)[1].strip("'")
        _mount(state, "blobfuse2", path, "fuse")
        save(state)
    elif name == "slurmd":
        _register_slurmd(state)
    elif unit.is_file() and "Type=oneshot" in unit.read_text():
        import subprocess  # noqa: PLC0415

        line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
        argv = line.removeprefix("ExecStart=").split()
        proc = subprocess.run([ROOT + argv[0], *argv[1:]], check=False, capture_output=True, text=True)
        with (SANDBOX / "journal.log").open("a") as fh:
            fh.write(f"{name}: exit {proc.returncode}: {proc.stdout}{proc.stderr}")
        ok = proc.returncode == 0 or (proc.returncode == 1 and "SuccessExitStatus=1" in unit.read_text())
        return 0 if ok else 1
    return 0


def _mount(state: dict, source: str, path: str, fstype: str) -> None:
    if path not in state["mounts"]:
        state["mounts"].append(path)
    state.setdefault("mount_sources", {})[path] = source
    mounts = Path(ROOT, "proc/mounts")
    mounts.parent.mkdir(parents=True, exist_ok=True)
    lines = [x for x in (mounts.read_text().splitlines() if mounts.exists() else []) if x.split()[1:2] != [path]]
    mounts.write_text("".join(f"{x}\n" for x in [*lines, f"{source} {path} {fstype} rw 0 0"]))


# A Slurm controller shared by every sandbox of one test (state["slurm_state"]): node records as slurmctld
# keeps them, with the fields gb300's scripts read (NodeAddr, features, Extra, State, Reason).
def _slurm_load(state: dict) -> dict:
    path = Path(state.get("slurm_state") or SANDBOX / "slurm.json")
    return json.loads(path.read_text()) if path.exists() else {"nodes": {}}


def _slurm_save(state: dict, slurm: dict) -> None:
    Path(state.get("slurm_state") or SANDBOX / "slurm.json").write_text(json.dumps(slurm, indent=1, sort_keys=True))


def _register_slurmd(state: dict) -> None:
    dropin = Path(ROOT, "etc/systemd/system/slurmd.service.d/gb300-dynamic.conf").read_text()
    conf = dict(w.split("=", 1) for w in re.search(r"--conf '([^']*)'", dropin).group(1).split())
    slurm = _slurm_load(state)
    node = slurm["nodes"].setdefault(state["hostname"], {"Extra": "", "State": "IDLE", "Reason": ""})
    node |= {"NodeAddr": state["address"], "AvailableFeatures": conf["Feature"], "Gres": conf["Gres"]}
    # A registration answers for the node again: slurmctld drops NOT_RESPONDING and a DOWN it set for that.
    flags = [f for f in node["State"].split("+") if f != "NOT_RESPONDING"]
    node["State"] = "+".join(["IDLE" if flags[0] == "DOWN" else flags[0], *flags[1:]])
    _slurm_save(state, slurm)


def hostlist(expr: str) -> list[str]:
    """The names a Slurm hostlist expression stands for (``gpu-[001-003,007]x`` and comma-separated parts), as
    ``scontrol show hostnames`` prints them: a stand-in's own parser, independent of gb300's ``slurm.hostlist``."""
    names: list[str] = []
    for raw in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", expr):
        part = raw.lstrip(",")
        match = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", part)
        if not match:
            names.append(part)
            continue
        for item in match.group(2).split(","):
            low, _, high = item.partition("-")
            for i in range(int(low), int(high or low) + 1):
                names.append(f"{match.group(1)}{i:0{len(low)}d}{match.group(3)}")
    return names


def scontrol(args: list[str], state: dict) -> int:
    slurm = _slurm_load(state)
    if args[:2] == ["show", "hostnames"]:
        sys.stdout.write("".join(f"{n}\n" for n in hostlist(args[2])))
        return 0
    if args[:2] == ["show", "node"]:
        wanted = [a for a in args[2:] if a != "-o"]
        names = hostlist(wanted[0]) if wanted else sorted(slurm["nodes"])
        for name in names:
            node = slurm["nodes"].get(name)
            if node is None:
                if wanted:
                    sys.stderr.write(f"Node {name} not found\n")
                    return 1
                continue
            fields = " ".join(f"{k}={v}" for k, v in sorted(node.items()) if k != "Reason")
            sys.stdout.write(f"NodeName={name} {fields} Reason={node['Reason']}\n")
        return 0
    if args[:1] == ["update"]:
        settings = dict(a.split("=", 1) for a in args[1:])
        settings = {k.lower(): v for k, v in settings.items()}
        node = slurm["nodes"][settings["nodename"]]
        if "extra" in settings:
            node["Extra"] = settings["extra"]
        if settings.get("state") == "drain":
            node["State"], node["Reason"] = "IDLE+DRAIN", settings["reason"]
        elif settings.get("state") == "resume":
            node["State"], node["Reason"] = "IDLE", ""
        _slurm_save(state, slurm)
        return 0
    if args[:1] == ["delete"] and args[1].lower().startswith("nodename="):
        return _delete_nodes(args[1], state, slurm)
    return _controller(args, state, slurm)


def _controller(args: list[str], state: dict, slurm: dict) -> int:
    """The controller's own verbs: reconfigure, ping and the topology it loaded."""
    if args == ["reconfigure"]:
        return _reconfigure(state, slurm)
    if args == ["ping"]:
        sys.stdout.write("Slurmctld(primary) at head is UP\n")
        return 0
    if args[:2] == ["show", "topology"]:
        sys.stdout.write("".join(f"{line}\n" for line in slurm.get("topology", [])))
        return 0
    return unsupported(["scontrol", *args])


def _reconfigure(state: dict, slurm: dict) -> int:
    """Since 24.05 a reconfigure re-execs slurmctld: a new process (sdiag's "Data since") that reads topology.conf
    again (as tests/slurm/real/test_topology_refresh.py shows of real Slurm); this stand-in takes any file and lists
    each block with the nodes the file names (it cannot show a deleted node leaving its block)."""
    import time  # noqa: PLC0415

    conf = Path(ROOT, "etc/slurm/topology.conf")
    text = conf.read_text() if conf.exists() else ""
    slurm["started"] = int(time.time())
    blocks = [line.split() for line in text.splitlines() if line.startswith("BlockName=")]
    slurm["topology"] = [f"{block[0]} BlockIndex={i} {' '.join(block[1:2])}" for i, block in enumerate(blocks)]
    _slurm_save(state, slurm)
    return 0


def sdiag(args: list[str], state: dict) -> int:
    """The one line gb300-topology-refresh reads: when the slurmctld now answering started its statistics."""
    started = int(_slurm_load(state).get("started", 0))
    sys.stdout.write(f"Data since      Thu Jan 01 00:00:00 1970 ({started})\n")
    return 0


def _delete_nodes(arg: str, state: dict, slurm: dict) -> int:
    """slurmctld's delete_nodes(): dynamic nodes only, none with a job (src/slurmctld/node_mgr.c)."""
    for name in hostlist(arg.split("=", 1)[1]):
        node = slurm["nodes"].get(name)
        if node is None or {"ALLOCATED", "MIXED", "COMPLETING"} & set(node["State"].split("+")):
            sys.stderr.write(f"delete_node {arg}: Requested nodes are busy or unknown\n")
            return 1
        del slurm["nodes"][name]
    _slurm_save(state, slurm)
    return 0


def sinfo(args: list[str], state: dict) -> int:
    if args == ["-h", "-N", "-o", "%N"]:
        sys.stdout.write("".join(f"{n}\n" for n in sorted(_slurm_load(state)["nodes"])))
        return 0
    return unsupported(["sinfo", *args])


def docker(args: list[str], state: dict) -> int:
    images = state.setdefault("images", [])
    if args[:2] == ["image", "inspect"]:
        return 0 if args[-1] in images else 1
    if args[:1] == ["pull"]:
        images.append(args[-1])
        save(state)
        return 0
    return unsupported(["docker", *args])


def _curl_request(args: list[str], url: str, state: dict) -> tuple[Any, Any] | None:
    """The request a curl command line makes (its ``-H`` headers, ``-H @-`` read from stdin) and an opener that
    sends it to the stand-in endpoints (state["endpoint"]); None when no endpoint runs (curl's exit 7). The
    stand-in speaks plain HTTP: an https URL goes to it as a proxied http request for the same host and path."""
    import urllib.request  # noqa: PLC0415

    headers = {}
    it = iter(args[:-1])
    for arg in it:
        if arg == "-H":
            header = next(it)
            if header == "@-":
                header = sys.stdin.read().strip()
            key, _, value = header.partition(":")
            headers[key.strip()] = value.strip()
    endpoint = state.get("endpoint")
    if not endpoint:
        return None
    request = urllib.request.Request("http://" + url.split("://", 1)[1], headers=headers)
    return request, urllib.request.build_opener(urllib.request.ProxyHandler({"http": endpoint}))


def http_get(args: list[str], state: dict) -> int:
    """curl without -o: ask the stand-in Azure endpoints and local services (state["endpoint"], a test server)."""
    import urllib.error  # noqa: PLC0415

    sent = _curl_request(args, args[-1], state)
    if sent is None:
        return 7
    request, opener = sent
    fail = any(a == "--fail" or (a.startswith("-") and not a.startswith("--") and "f" in a) for a in args)
    write_out = args[args.index("-w") + 1] if "-w" in args else ""
    try:
        with opener.open(request, timeout=10) as response:
            status, body = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        if fail:
            return 22
        status, body = error.code, error.read().decode()
    except OSError:
        return 7
    sys.stdout.write(body + write_out.replace("\\n", "\n").replace("%{http_code}", str(status)))
    return 0


def http_download(args: list[str], state: dict, out: str, url: str) -> int:
    """curl -o FILE -w '%{http_code}' of a Blob URL: ask the stand-in endpoints (state["endpoint"]) for the bytes,
    write the body to FILE whatever the status (as curl does without --fail) and print the status code. ``-o -``
    writes the body to standard output; ``-D FILE`` writes the status line there; ``--max-filesize N`` refuses a
    longer body with curl's exit 63 before writing any of it (what curl does when the length is declared, as the
    stand-in's always is: it cannot show a body of unknown length; tests/node/test_payload_trust.py runs the real
    curl for that)."""
    import urllib.error  # noqa: PLC0415

    sent = _curl_request(args, url, state)
    if sent is None:
        return 7
    request, opener = sent
    write_out = args[args.index("-w") + 1] if "-w" in args else ""
    try:
        with opener.open(request, timeout=10) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    except OSError:
        return 7
    if "-D" in args:
        Path(args[args.index("-D") + 1]).write_text(f"HTTP/1.1 {status} stand-in\r\n\r\n")
    if "--max-filesize" in args and len(body) > int(args[args.index("--max-filesize") + 1]):
        sys.stderr.write("curl: (63) Maximum file size exceeded\n")
        return 63
    if out == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(body)
    else:
        Path(out).write_bytes(body)
    sys.stdout.write(write_out.replace("%{http_code}", str(status)))
    return 0


def getent(args: list[str], state: dict) -> int:
    """passwd and group entries of the image's system users (state["users"]: name -> uid)."""
    users = state.get("users", {})
    if args[0] in ("passwd", "group") and args[1] in users:
        uid = users[args[1]]
        sys.stdout.write(f"{args[1]}:x:{uid}:{uid}::/var/lib/{args[1]}:/usr/sbin/nologin\n")
        return 0
    return 2


def nft(args: list[str], state: dict) -> int:
    """nftables: ``-f -`` loads a ruleset from stdin (kept whole in state["nft"], each load appended to
    state["nft_loads"]); ``list table FAMILY NAME`` answers whether a loaded ruleset defines that table."""
    if args == ["-f", "-"]:
        rules = sys.stdin.read()
        state["nft"] = rules
        state.setdefault("nft_loads", []).append(rules)
        save(state)
        return 0
    if args[:2] == ["list", "table"] and len(args) == 4:
        return 0 if f"table {args[2]} {args[3]} {{" in state.get("nft", "") else 1
    return unsupported(["nft", *args])


def mdadm(args: list[str], state: dict) -> int:
    if args[0] == "--create":
        md = node_path(args[1])
        name = next(a.split("=", 1)[1] for a in args if a.startswith("--name="))
        state["arrays"][md] = {
            "name": name,
            "members": [node_path(a) for a in args if a.startswith(ROOT + "/dev/nvme")],
        }
        save(state)
        return 0
    if args[:2] == ["--detail", "--brief"]:
        for md, arr in state["arrays"].items():
            sys.stdout.write(
                f"ARRAY {md} metadata=1.2 name={state['hostname']}:{arr['name']} "
                "UUID=3f1e2d4c:9a8b7c6d:5e4f3a2b:1c0d9e8f\n"
            )
        return 0
    if args[0] == "--detail":
        return 0 if node_path(args[1]) in state["arrays"] else 1
    if args[0] == "--assemble":
        # Only arrays whose superblocks survive (listed in state["superblocks"]) assemble.
        md = node_path(args[1])
        if md in state.get("superblocks", {}):
            state["arrays"][md] = state["superblocks"][md]
            save(state)
            return 0
        return 1
    return unsupported(["mdadm", *args])


def blkid(args: list[str], state: dict) -> int:
    dev = node_path(args[-1])
    fs = state["filesystems"].get(dev)
    if fs is None:
        return 2
    field = args[args.index("-s") + 1]
    sys.stdout.write((fs["type"] if field == "TYPE" else fs["uuid"]) + "\n")
    return 0


def mkfs(args: list[str], state: dict, fstype: str = "xfs") -> int:
    state["filesystems"][node_path(args[-1])] = {
        "type": fstype,
        "uuid": "b7e2c1d0-5a4f-4e3b-9c8d-7f6e5d4c3b2a",
    }
    save(state)
    return 0


def mount(args: list[str], state: dict) -> int:
    fstype = args[args.index("-t") + 1] if "-t" in args else "xfs"
    _mount(state, node_path(args[-2]), node_path(args[-1]), fstype)
    save(state)
    return 0


def findmnt(args: list[str], state: dict) -> int:
    if args == ["-n", "-o", "SOURCE", "/"]:
        sys.stdout.write(state["root_source"] + "\n")
        return 0
    target = node_path(args[-1])
    if target in state["mounts"]:
        source = state.get("mount_sources", {}).get(target, "/dev/md127")
        sys.stdout.write(f"{source}\n" if "SOURCE" in args else f"{target} {source} xfs rw,noatime\n")
        return 0
    return 1


def lsblk(args: list[str], state: dict) -> int:
    data = json.loads(fixture(state["lsblk"]))
    if "-J" in args:
        sys.stdout.write(json.dumps(data))
        return 0
    for dev in data["blockdevices"]:
        sys.stdout.write(f"{dev['name']} {dev['model']}\n")
    return 0


def modprobe(args: list[str], state: dict) -> int:
    module = args[-1]
    Path(ROOT, "sys/module", module).mkdir(parents=True, exist_ok=True)
    if module == "nvidia":
        proc = Path(ROOT, "proc/driver/nvidia/version")
        proc.parent.mkdir(parents=True, exist_ok=True)
        proc.write_text((Path(state["fixtures_dir"]) / "proc-driver-nvidia-version.txt").read_text())
        options = Path(ROOT, "etc/modprobe.d/90-gb300-nvidia.conf")
        if options.exists() and "NVreg_CreateImexChannel0=1" in options.read_text():
            channel = Path(ROOT, "dev/nvidia-caps-imex-channels/channel0")
            channel.parent.mkdir(parents=True, exist_ok=True)
            channel.touch()
    return 0


def sysctl(args: list[str], state: dict) -> int:
    if args[0] == "-n":
        value = state["sysctl"].get(args[1])
        if value is None:
            return 255
        sys.stdout.write(value + "\n")
        return 0
    if "-p" in args:
        for line in Path(args[-1]).read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = (s.strip() for s in line.split("=", 1))
                state["sysctl"][key] = value
        save(state)
        return 0
    return unsupported(["sysctl", *args])


def apt_mark(args: list[str], state: dict) -> int:
    if args == ["showhold"]:
        sys.stdout.write("".join(p + "\n" for p in sorted(state["holds"])))
        return 0
    if args[0] == "hold":
        state["holds"] = sorted(set(state["holds"]) | set(args[1:]))
        save(state)
        return 0
    return unsupported(["apt-mark", *args])


def nvidia_ctk(args: list[str], state: dict) -> int:
    if args[:2] == ["cdi", "generate"]:
        out = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n")
        return 0
    if args[:2] == ["runtime", "configure"]:
        path = Path(ROOT, "etc/docker/daemon.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}\n')
        return 0
    return unsupported(["nvidia-ctk", *args])


def logger(args: list[str], state: dict) -> int:
    """journal.log gets `<tag>: <line>`; syslog.jsonl gets tag, priority (logger's default user.notice) and line,
    what rsyslog hands the Azure Monitor Agent."""
    tag, echo, priority, message = "logger", False, "user.notice", []
    it = iter(args)
    for arg in it:
        if arg == "-t":
            tag = next(it)
        elif arg == "-p":
            priority = next(it)
        elif arg == "-s":
            echo = True
        elif arg != "--":
            message.append(arg)
    lines = [" ".join(message)] if message else sys.stdin.read().splitlines()
    with (SANDBOX / "journal.log").open("a") as fh, (SANDBOX / "syslog.jsonl").open("a") as syslog:
        for line in lines:
            fh.write(f"{tag}: {line}\n")
            syslog.write(json.dumps({"tag": tag, "priority": priority, "message": line}) + "\n")
            if echo:
                sys.stderr.write(f"<{tag}> {line}\n")
    return 0


def systemd_run(args: list[str], state: dict) -> int:
    """A transient timer: recorded in state["transient"] (unit -> when and what), never run by itself."""
    first = next(i for i, a in enumerate(args) if not a.startswith("--"))  # options, then the command and its args
    options = dict(a.split("=", 1) for a in args[:first])
    command = args[first:]
    unit = options["--unit"]
    transient = state.setdefault("transient", {})
    if unit in transient:
        sys.stderr.write(f"Failed to start transient timer unit: Unit {unit}.timer was already loaded\n")
        return 1
    transient[unit] = {
        "on_active": options.get("--on-active"),
        "on_unit_active": options.get("--on-unit-active"),
        "command": command,
    }
    save(state)
    return 0


def curl(args: list[str], state: dict) -> int:
    """Serve a recorded file for a URL listed in state["downloads"] (URL -> fixture path), else a text stub."""
    if "-o" not in args:
        return http_get(args, state)
    out, url = args[args.index("-o") + 1], args[-1]
    if ".blob.core.windows.net/" in url:
        return http_download(args, state, out, url)
    served = state.get("downloads", {}).get(url)
    if served is not None:
        Path(out).write_bytes(Path(served).read_bytes())
    else:
        Path(out).write_text(f"stand-in download of {url}\n")
    return 0


NCCL_TESTS_BINARIES = ("all_reduce", "all_gather", "alltoall", "broadcast", "reduce", "reduce_scatter", "sendrecv")


def make(args: list[str], state: dict) -> int:
    """nccl-tests' `make MPI=1 ...` writes build/*_perf; `make install` puts the plugin under the prefix."""
    variables = dict(a.split("=", 1) for a in args if "=" in a)
    if "install" in args:
        prefix = Path(Path("standin-prefix").read_text().strip())
        (prefix / "lib").mkdir(parents=True, exist_ok=True)
        (prefix / "lib" / "libnccl-net.so").write_text("ELF stand-in\n")
        return 0
    if variables.get("MPI") == "1":
        Path("build").mkdir(exist_ok=True)
        for name in NCCL_TESTS_BINARIES:
            binary = Path("build", f"{name}_perf")
            binary.write_text(f"ELF stand-in built with {variables.get('NVCC_GENCODE', '')}\n")
            binary.chmod(0o755)
        return 0
    return 0 if Path("standin-prefix").exists() else unsupported(["make", *args])


def dcgmi(args: list[str], state: dict) -> int:
    """`dcgmi diag -r N` passes; `dcgmi dmon -e <the health gate's fields> -c 1` reads a healthy sample."""
    if args[:1] == ["diag"]:
        sys.stdout.write(fixture("../slurm/dcgmi-diag-r1.pass.txt"))
        return 0
    if args[:1] == ["dmon"]:
        sys.stdout.write(fixture("../slurm/dcgmi-dmon.gb300.healthy.txt"))
        return 0
    return unsupported(["dcgmi", *args])


READ_ONLY = {
    "sdiag": sdiag,
    "nvidia-smi": nvidia_smi,
    "dpkg-query": dpkg_query,
    "ibstat": lambda a, s: sys.stdout.write(fixture(s["ibstat"])) and 0,
    "lsblk": lsblk,
    "findmnt": findmnt,
    "blkid": blkid,
    "logger": logger,
    "uname": lambda a, s: sys.stdout.write((s["kernel"] if a == ["-r"] else s["arch"]) + "\n") and 0,
    "hostname": lambda a, s: sys.stdout.write(s["hostname"] + "\n") and 0,
    "sinfo": sinfo,
    "getent": getent,
    "dmesg": lambda a, s: 0,
    "dcgmi": dcgmi,
    "nvidia-imex-ctl": lambda a, s: sys.stdout.write("READY\n") and 0,
    "modinfo": lambda a, s: 0 if a[-1] in s.get("kernel_modules", []) else 1,
    "lfs": lambda a, s: 0,
    "enroot": lambda a, s: sys.stdout.write(s["packages"].get("enroot", "").split("-")[0] + "\n") and 0,
}
MUTATING = {
    "apt-get": apt_get,
    "mkfs.xfs": mkfs,
    "mkfs.ext4": lambda a, s: mkfs(a, s, "ext4"),
    "mount": mount,
    "modprobe": modprobe,
    "update-initramfs": lambda a, s: 0,
    "update-grub": lambda a, s: 0,
    "unattended-upgrade": lambda a, s: upgrade(s) or 0,
    "nvidia-ctk": nvidia_ctk,
    "curl": curl,
    "make": make,
    "chown": lambda a, s: 0,
    "docker": docker,
    "systemd-run": systemd_run,
}
# These mutate only for some verbs; the others are reads.
MIXED = {
    "systemctl": (systemctl, lambda a: a[0] not in ("is-enabled", "is-active")),
    "sysctl": (sysctl, lambda a: a[0] != "-n"),
    "apt-mark": (apt_mark, lambda a: a[0] != "showhold"),
    "mdadm": (mdadm, lambda a: a[0] in ("--create", "--assemble")),
    "scontrol": (scontrol, lambda a: a[0] in ("update", "reconfigure", "delete")),
    "nft": (nft, lambda a: a[0] != "list"),
}
# Present so that `command -v` finds them (the image carries them); the steps never run them directly.
PRESENT = ("blobfuse2", "mount.lustre", "prometheus", "slurmd", "slurmctld", "munge")
COMMANDS = sorted({*READ_ONLY, *MUTATING, *MIXED, *PRESENT})


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    state = load()
    if state.get("hang") and " ".join([name, *args]).startswith(state["hang"]):
        # A call that never returns (a stalled download, a wedged driver): the test kills the bootstrap here.
        log_call("HANG", [name, *args])
        import time  # noqa: PLC0415

        time.sleep(3600)
    if name in MIXED:
        func, mutates = MIXED[name]
        log_call("MUTATE" if mutates(args) else "READ", [name, *args])
        return func(args, state)
    if name in MUTATING:
        log_call("MUTATE", [name, *args])
        return MUTATING[name](args, state)
    if name in PRESENT:
        return unsupported([name, *args])
    log_call("READ", [name, *args])
    return READ_ONLY[name](args, state)


if __name__ == "__main__":
    if re.fullmatch(r"[A-Za-z0-9._+-]+", sys.argv[1]) is None:
        raise SystemExit(99)
    raise SystemExit(main())
