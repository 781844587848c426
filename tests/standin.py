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

SANDBOX = Path(os.environ.get("GB300_SANDBOX", "."))
ROOT = os.environ.get("GB300_ROOT", "")
STATE_FILE = SANDBOX / "state.json"


def load() -> dict:
    return json.loads(STATE_FILE.read_text())


def save(state: dict) -> None:
    STATE_FILE.write_text(json.dumps(state, indent=1, sort_keys=True))


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


def apt_get(args: list[str], state: dict) -> int:
    if "update" in args:
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
        state["packages"][name] = pattern.replace("*", "1") if pattern else "9.9-standin"
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
    verb, unit = args[0], args[-1]
    svc = state["services"].setdefault(unit, {"enabled": False, "active": False})
    if verb == "is-enabled":
        return 0 if svc["enabled"] else 1
    if verb == "is-active":
        return 0 if svc["active"] else 3
    if verb == "enable":
        svc["enabled"] = True
    elif verb in ("start", "restart"):
        svc["active"] = True
    else:
        return unsupported(["systemctl", *args])
    save(state)
    return 0


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


def mkfs(args: list[str], state: dict) -> int:
    state["filesystems"][node_path(args[-1])] = {
        "type": "xfs",
        "uuid": "b7e2c1d0-5a4f-4e3b-9c8d-7f6e5d4c3b2a",
    }
    save(state)
    return 0


def mount(args: list[str], state: dict) -> int:
    state["mounts"].append(node_path(args[-1]))
    save(state)
    return 0


def findmnt(args: list[str], state: dict) -> int:
    if args == ["-n", "-o", "SOURCE", "/"]:
        sys.stdout.write(state["root_source"] + "\n")
        return 0
    target = node_path(args[-1])
    if target in state["mounts"]:
        sys.stdout.write(f"{target} /dev/md127 xfs rw,noatime\n")
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
    tag, echo, message = "logger", False, []
    it = iter(args)
    for arg in it:
        if arg == "-t":
            tag = next(it)
        elif arg == "-s":
            echo = True
        else:
            message.append(arg)
    lines = [" ".join(message)] if message else sys.stdin.read().splitlines()
    with (SANDBOX / "journal.log").open("a") as fh:
        for line in lines:
            fh.write(f"{tag}: {line}\n")
            if echo:
                sys.stderr.write(f"<{tag}> {line}\n")
    return 0


def curl(args: list[str], state: dict) -> int:
    """Serve a recorded file for a URL listed in state["downloads"] (URL -> fixture path), else a text stub."""
    out, url = args[args.index("-o") + 1], args[-1]
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


READ_ONLY = {
    "nvidia-smi": nvidia_smi,
    "dpkg-query": dpkg_query,
    "ibstat": lambda a, s: sys.stdout.write(fixture(s["ibstat"])) and 0,
    "lsblk": lsblk,
    "findmnt": findmnt,
    "blkid": blkid,
    "logger": logger,
    "uname": lambda a, s: sys.stdout.write(s["arch"] + "\n") and 0,
    "hostname": lambda a, s: sys.stdout.write(s["hostname"] + "\n") and 0,
}
MUTATING = {
    "apt-get": apt_get,
    "mkfs.xfs": mkfs,
    "mount": mount,
    "modprobe": modprobe,
    "update-initramfs": lambda a, s: 0,
    "nvidia-ctk": nvidia_ctk,
    "curl": curl,
    "make": make,
}
# These mutate only for some verbs; the others are reads.
MIXED = {
    "systemctl": (systemctl, lambda a: a[0] not in ("is-enabled", "is-active")),
    "sysctl": (sysctl, lambda a: a[0] != "-n"),
    "apt-mark": (apt_mark, lambda a: a[0] != "showhold"),
    "mdadm": (mdadm, lambda a: a[0] in ("--create", "--assemble")),
}
COMMANDS = sorted({*READ_ONLY, *MUTATING, *MIXED})


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    state = load()
    if name in MIXED:
        func, mutates = MIXED[name]
        log_call("MUTATE" if mutates(args) else "READ", [name, *args])
        return func(args, state)
    if name in MUTATING:
        log_call("MUTATE", [name, *args])
        return MUTATING[name](args, state)
    log_call("READ", [name, *args])
    return READ_ONLY[name](args, state)


if __name__ == "__main__":
    if re.fullmatch(r"[A-Za-z0-9._+-]+", sys.argv[1]) is None:
        raise SystemExit(99)
    raise SystemExit(main())
