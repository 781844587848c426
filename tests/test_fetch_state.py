"""scripts/fetch-state: a pull request reads the stripped state that deploy or drift published on main, never one a
pull request or a fork uploaded, and never hands its token to the download host. Run against a local GitHub API."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "fetch-state"
REPO_ID = 4242
TOKEN = "ghs_pull_request_token"  # noqa: S105 - a stand-in, checked by the fake API


def _zip(name: str, text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, text)
    return buffer.getvalue()


class Server:
    """A GitHub API (artifacts, runs, a redirecting download) and a separate blob host, on localhost."""

    def __init__(self, artifacts: list[dict[str, Any]], runs: dict[int, dict[str, str]], status: int = 200) -> None:
        self.artifacts, self.runs, self.status = artifacts, runs, status
        self.off_main: set[str] = set()  # commits the compare API says main does not contain
        self.compared: list[str] = []
        self.blob_headers: list[dict[str, str]] = []
        self.blobs: dict[str, bytes] = {}
        self.api = self._serve(self._api_handler())
        self.blob = self._serve(self._blob_handler())

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def url(self, server: ThreadingHTTPServer) -> str:
        return f"http://127.0.0.1:{server.server_address[1]}"

    def _api_handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                assert self.headers.get("Authorization") == f"Bearer {TOKEN}"
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.end_headers()
                    return
                path = self.path
                if path.startswith("/repos/o/r/actions/artifacts?"):
                    self._json({"total_count": len(outer.artifacts), "artifacts": outer.artifacts})
                elif path.startswith("/repos/o/r/actions/runs/"):
                    run_id = int(path.rsplit("/", 1)[1])
                    self._json({"head_branch": "main", "head_sha": f"{run_id:040d}", **outer.runs[run_id]})
                elif path.startswith("/repos/o/r/compare/"):
                    sha = path.split("/")[5].split("...")[0]
                    outer.compared.append(path.split("/")[5])
                    self._json({"status": "diverged" if sha in outer.off_main else "ahead"})
                elif path.startswith("/repos/o/r/actions/artifacts/") and path.endswith("/zip"):
                    self.send_response(302)
                    self.send_header("Location", f"{outer.url(outer.blob)}/blob/{path.split('/')[6]}?sig=signed")
                    self.end_headers()
                else:
                    self.send_response(404)
                    self.end_headers()

            def _json(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _blob_handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.blob_headers.append(dict(self.headers))
                data = outer.blobs[self.path.split("/")[2].split("?")[0]]
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def close(self) -> None:
        for server in (self.api, self.blob):
            server.shutdown()
            server.server_close()


def _artifact(
    artifact_id: int, run_id: int, created: str, *, branch: str = "main", fork: bool = False
) -> dict[str, Any]:
    return {
        "id": artifact_id,
        "name": "state-reference",
        "expired": False,
        "created_at": created,
        "archive_download_url": f"/repos/o/r/actions/artifacts/{artifact_id}/zip",
        "workflow_run": {
            "id": run_id,
            "repository_id": REPO_ID,
            "head_repository_id": REPO_ID + 1 if fork else REPO_ID,
            "head_branch": branch,
            "head_sha": f"{run_id:040d}",
        },
    }


@pytest.fixture
def github() -> Iterator[Server]:
    artifacts = [
        _artifact(5, 50, "2026-12-01T10:00:00Z", branch="feature"),  # a pull request's own upload
        _artifact(4, 40, "2026-12-01T09:00:00Z", fork=True),  # a fork's run whose branch is also called main
        _artifact(3, 30, "2026-12-01T08:00:00Z"),  # main, but the pull request workflow
        _artifact(2, 20, "2026-12-01T07:00:00Z"),  # drift on main: the one to take
        _artifact(1, 10, "2026-11-30T07:00:00Z"),  # an older deploy
    ]
    runs = {
        50: {"path": ".github/workflows/pr.yml", "event": "pull_request"},
        40: {"path": ".github/workflows/drift.yml", "event": "pull_request"},
        30: {"path": ".github/workflows/pr.yml", "event": "push"},
        20: {"path": ".github/workflows/drift.yml", "event": "schedule"},
        10: {"path": ".github/workflows/deploy.yml", "event": "push"},
    }
    server = Server(artifacts, runs)
    for i in range(1, 6):
        server.blobs[str(i)] = _zip(f"state-reference-{i}.json", json.dumps({"version": 3, "from": i}))
    for artifact in artifacts:
        artifact["archive_download_url"] = server.url(server.api) + artifact["archive_download_url"]
    yield server
    server.close()


def _run(server: Server, out: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "GITHUB_API_URL": server.url(server.api),
        "GITHUB_REPOSITORY": "o/r",
        "GH_TOKEN": TOKEN,
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), "reference", str(out)], env=env, capture_output=True, text=True, check=False
    )


def test_takes_the_newest_state_published_on_main_by_deploy_or_drift(github: Server, tmp_path: Path) -> None:
    """Newer uploads by a pull request, a fork or another workflow are passed over; the drift run's is written."""
    done = _run(github, tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "state" / "reference.json").read_text()) == {"version": 3, "from": 2}


def test_the_token_never_reaches_the_download_host(github: Server, tmp_path: Path) -> None:
    """The archive URL is signed: the download follows GitHub's redirect without the job's token."""
    assert _run(github, tmp_path / "state").returncode == 0
    assert github.blob_headers
    assert all("Authorization" not in headers for headers in github.blob_headers)


def test_no_published_state_plans_without_it(github: Server, tmp_path: Path) -> None:
    """A stack never deployed (or whose artifact expired) writes nothing, says so, and exits 0."""
    github.artifacts.clear()
    done = _run(github, tmp_path / "state")
    assert done.returncode == 0
    assert "::notice::no published state for stack reference" in done.stdout
    assert not (tmp_path / "state").exists()


def test_an_api_failure_fails_the_job(github: Server, tmp_path: Path) -> None:
    """A GitHub API error is not taken for 'not deployed': the job fails and says why."""
    github.status = 403
    done = _run(github, tmp_path / "state")
    assert done.returncode == 1
    assert "::error::fetch-state reference" in done.stderr


def test_a_run_whose_commit_is_not_on_main_is_passed_over(github: Server, tmp_path: Path) -> None:
    """A drift run that says `main` but whose commit main does not contain (a manual run on a tag named main) is
    refused with a warning; the older deploy on main is taken instead."""
    github.off_main.add(f"{20:040d}")
    done = _run(github, tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert "::warning::fetch-state reference: run 20 names main, but its commit is not on main" in done.stdout
    assert json.loads((tmp_path / "state" / "reference.json").read_text()) == {"version": 3, "from": 1}
    assert f"{20:040d}...main?per_page=1" in github.compared


def test_a_run_on_another_branch_is_refused_whatever_its_artifact_says(github: Server, tmp_path: Path) -> None:
    """The run's own head_branch counts: a run of another branch is refused even when the artifact listing says main,
    and with no run left nothing is written (the plan runs without --state)."""
    for run_id in (20, 10):
        github.runs[run_id] = {**github.runs[run_id], "head_branch": "feature"}
    done = _run(github, tmp_path / "state")
    assert done.returncode == 0, done.stderr
    assert "::notice::no published state for stack reference" in done.stdout
    assert not (tmp_path / "state").exists()
    assert not github.compared
