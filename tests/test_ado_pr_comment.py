"""scripts/ado-pr-comment: an Azure DevOps pull request gets one plan-summary thread, created on the first run and
updated in place on the next, through the documented REST API (Git Pull Request Threads / Thread Comments, 7.1).
Run against a local server that answers as that API does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from gb300.ops import ci_summary

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ado-pr-comment"
TOKEN = "job-access-token"  # noqa: S105 - a stand-in, checked by the fake API
THREADS = "/org/my%20project/_apis/git/repositories/repo-guid/pullRequests/17/threads"


class FakeAzureDevOps:
    """The threads of one pull request, served as Azure DevOps' REST API 7.1 does: list returns
    ``{"value": [...], "count": n}``, create assigns thread and comment ids, update replaces a comment's content."""

    def __init__(self, threads: list[dict[str, Any]], status: int = 200) -> None:
        self.threads, self.status = threads, status
        self.calls: list[tuple[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def collection(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/org/"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _check(self) -> str | None:
                parts = urlsplit(self.path)
                outer.calls.append((self.command, parts.path))
                if parse_qs(parts.query).get("api-version") != ["7.1"]:
                    self._reply(400, {"message": "api-version 7.1 expected"})
                    return None
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._reply(401, {"message": "no or wrong token"})
                    return None
                if outer.status != 200:
                    self._reply(outer.status, {"message": "refused"})
                    return None
                return parts.path

            def _body(self) -> Any:
                assert self.headers.get("Content-Type") == "application/json"
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

            def do_GET(self) -> None:
                path = self._check()
                if path == THREADS:
                    self._reply(200, {"value": outer.threads, "count": len(outer.threads)})
                elif path is not None:
                    self._reply(404, {})

            def do_POST(self) -> None:
                path = self._check()
                if path != THREADS:
                    if path is not None:
                        self._reply(404, {})
                    return
                body = self._body()
                comments = [
                    {**c, "id": n, "commentType": "text", "isDeleted": False}
                    for n, c in enumerate(body["comments"], start=1)
                ]
                assert [c["parentCommentId"] for c in comments] == [0]
                thread = {"id": 100 + len(outer.threads), "status": "active", "comments": comments}
                outer.threads.append(thread)
                self._reply(200, thread)

            def do_PATCH(self) -> None:
                path = self._check()
                if path is None:
                    return
                head, _, comment_id = path.rpartition("/comments/")
                thread_id = head.rpartition("/")[2]
                thread = next((t for t in outer.threads if str(t["id"]) == thread_id), None)
                comment = next((c for c in (thread or {}).get("comments", []) if str(c["id"]) == comment_id), None)
                if comment is None or not head.startswith(THREADS + "/"):
                    self._reply(404, {})
                    return
                comment["content"] = self._body()["content"]
                self._reply(200, comment)

            def _reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def ours(self) -> list[dict[str, Any]]:
        return [t for t in self.threads if t["comments"][0]["content"].startswith(ci_summary.MARKER)]


@pytest.fixture
def reviewer_thread() -> dict[str, Any]:
    """A reviewer's thread that merely quotes the marker in its second comment: never to be touched."""
    return {
        "id": 7,
        "status": "active",
        "comments": [
            {"id": 1, "content": "Please shrink the pool", "commentType": "text"},
            {"id": 2, "content": f"see {ci_summary.MARKER}", "commentType": "text"},
        ],
    }


@pytest.fixture
def ado(reviewer_thread: dict[str, Any]) -> Iterator[FakeAzureDevOps]:
    fake = FakeAzureDevOps([reviewer_thread])
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def _summary(tmp_path: Path, racks: int) -> Path:
    """The comment as the pipeline writes it: ci_summary.py over a plan file."""
    plan = {"stack": "dev", "findings": [], "summary": {"racks": racks, "vms": 18 * racks, "gpus": 72 * racks}}
    (tmp_path / "plan-dev.json").write_text(json.dumps(plan))
    out = tmp_path / "comment.md"
    rendered = subprocess.run(
        [sys.executable, "-I", str(ROOT / "infra/gb300/ops/ci_summary.py"), "--stacks", '["dev"]', "plan-dev.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    out.write_text(rendered.stdout)
    return out


def _run(fake: FakeAzureDevOps, body: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SYSTEM_COLLECTIONURI": fake.collection,
        "SYSTEM_TEAMPROJECT": "my project",
        "BUILD_REPOSITORY_ID": "repo-guid",
        "SYSTEM_PULLREQUEST_PULLREQUESTID": "17",
        "SYSTEM_ACCESSTOKEN": TOKEN,
        **overrides,
    }
    return subprocess.run(
        [sys.executable, "-I", str(SCRIPT), str(body)], env=env, capture_output=True, text=True, check=False
    )


def test_first_run_creates_one_thread_and_the_next_updates_it(ado: FakeAzureDevOps, tmp_path: Path) -> None:
    """Push one: a new active thread carrying the summary. Push two: the same thread's comment now says the new
    plan; no second thread, and the reviewer's thread is untouched."""
    first = _run(ado, _summary(tmp_path, racks=1))
    assert first.returncode == 0, first.stderr
    assert [m for m, _ in ado.calls] == ["GET", "POST"]
    [thread] = ado.ours()
    assert "| `dev` | 1 | 18 | 72 |" in thread["comments"][0]["content"]
    assert thread["status"] == "active"
    assert "created thread" in first.stdout

    ado.calls.clear()
    second = _run(ado, _summary(tmp_path, racks=2))
    assert second.returncode == 0, second.stderr
    assert [m for m, _ in ado.calls] == ["GET", "PATCH"]
    assert ado.ours() == [thread]
    assert "| `dev` | 2 | 36 | 144 |" in thread["comments"][0]["content"]
    assert len(ado.threads) == 2
    assert ado.threads[0]["comments"][1]["content"] == f"see {ci_summary.MARKER}"


def test_a_refusal_fails_the_step_naming_the_call(reviewer_thread: dict[str, Any], tmp_path: Path) -> None:
    """Without "Contribute to pull requests" Azure DevOps refuses: exit 1 and the refused call in the log."""
    fake = FakeAzureDevOps([reviewer_thread], status=403)
    try:
        result = _run(fake, _summary(tmp_path, racks=1))
    finally:
        fake.server.shutdown()
        fake.server.server_close()
    assert result.returncode == 1
    assert "HTTP 403" in result.stderr
    assert "/pullRequests/17/threads" in result.stderr


def test_an_unmapped_token_is_a_usage_error_saying_how_to_map_it(ado: FakeAzureDevOps, tmp_path: Path) -> None:
    """System.AccessToken reaches a script only when the step maps it: the message says how."""
    result = _run(ado, _summary(tmp_path, racks=1), SYSTEM_ACCESSTOKEN="")
    assert result.returncode == 2
    assert "SYSTEM_ACCESSTOKEN" in result.stderr
    assert "$(System.AccessToken)" in result.stderr
    assert ado.calls == []


def test_only_the_pull_request_comment_step_holds_the_job_token() -> None:
    """azure-pipelines.yml maps System.AccessToken into one step: the validate stage's `comment` job, which runs for
    pull requests (not forks) after the plans, renders with ci_summary.py and posts with this script."""
    pipeline = yaml.safe_load((ROOT / "azure-pipelines.yml").read_text())
    holders = [
        (stage["stage"], job.get("job") or job.get("deployment"), step)
        for stage in pipeline["stages"]
        for job in stage.get("jobs", [])
        for step in job.get("steps", [])
        if "System.AccessToken" in json.dumps(step)
    ]
    assert [(stage, job) for stage, job, _ in holders] == [("validate", "comment")]
    step = holders[0][2]
    assert step["env"] == {"SYSTEM_ACCESSTOKEN": "$(System.AccessToken)"}
    assert "infra/gb300/ops/ci_summary.py" in step["bash"]
    assert "scripts/ado-pr-comment" in step["bash"]
    job = next(j for s in pipeline["stages"] for j in s.get("jobs", []) if j.get("job") == "comment")
    assert job["dependsOn"] == "plan"
    assert "eq(variables['Build.Reason'], 'PullRequest')" in job["condition"]
    assert "System.PullRequest.IsFork" in job["condition"]
