"""The opt-in Cloud TPU metadata lookup, against real servers on 127.0.0.1.

One answers like the GCE metadata server, one accepts connections and never answers, and one
refuses them; detection must take the facts from the first, give up on the other two within
its budget, and never connect at all unless the user opted in.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import accelkit
import pytest
from accelkit_plugins.tpu import metadata
from accelkit_plugins.tpu import testing as fake

ATTRIBUTES = {"accelerator-type": "v6e-16", "agent-worker-number": "0", "instance-id": "slice-m"}


class MetadataHandler(http.server.BaseHTTPRequestHandler):
    """Answers ``/computeMetadata/v1/instance/attributes/<name>`` for Metadata-Flavor: Google."""

    protocol_version = "HTTP/1.1"  # keep-alive: the plugin asks every attribute on one connection
    requests: list[str] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        name = self.path.rsplit("/", 1)[-1]
        flavoured = self.headers.get("Metadata-Flavor") == "Google"
        body = ATTRIBUTES.get(name, "").encode() if flavoured else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet: the test reads the requests list instead."""


@pytest.fixture
def answering() -> Iterator[str]:
    MetadataHandler.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MetadataHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/computeMetadata/v1/instance/attributes/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent() -> Iterator[str]:
    """Accepts connections (the kernel's backlog does) and never reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/attributes/"


@pytest.fixture
def refusing() -> str:
    """A port nothing listens on: connections are refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/attributes/"


def node_with(tmp_path: Path, server: str, opt_in: str = "1") -> accelkit.Node:
    env = {"ACCELKIT_TPU_METADATA": opt_in, "ACCELKIT_TPU_METADATA_URL": server}
    return accelkit.detect_node(fake.make_host(4, tmp_path, env=env))


def tpu_notes(node: accelkit.Node) -> str:
    return "\n".join(d.message for d in node.diagnostics if d.family == "tpu")


def test_an_answering_server_fills_the_pod_facts_once(tmp_path: Path, answering: str) -> None:
    node = node_with(tmp_path, answering)
    assert node.resources["slice-m"] == 1
    assert node.resources["TPU-v6e-16-head"] == 1
    assert node.labels["accelkit/tpu.pod-type"] == "v6e-16"
    assert {d.type_label for d in node.devices} == {"TPU-V6E"}
    assert sorted(path.rsplit("/", 1)[-1] for path in MetadataHandler.requests) == sorted(
        ATTRIBUTES
    )  # asked once for the whole detection, not once per label or resource
    assert "pod facts from the TPU metadata server" in tpu_notes(node)


def test_the_environment_wins_and_is_not_asked_again(tmp_path: Path, answering: str) -> None:
    env = {
        "ACCELKIT_TPU_METADATA": "1",
        "ACCELKIT_TPU_METADATA_URL": answering,
        "TPU_ACCELERATOR_TYPE": "v6e-8",
        "TPU_WORKER_ID": "1",
        "TPU_NAME": "from-env",
    }
    node = accelkit.detect_node(fake.make_host(4, tmp_path, env=env))
    assert node.resources["from-env"] == 1
    assert "TPU-v6e-8-head" not in node.resources
    assert MetadataHandler.requests == []


def test_a_server_that_never_answers_costs_one_budget_and_a_warning(
    tmp_path: Path, silent: str
) -> None:
    node = node_with(tmp_path, silent)
    assert len(node.devices) == 4  # the chips are there; only the pod facts are missing
    assert not any(name.endswith("-head") for name in node.resources)
    assert "gave no answer (TimeoutError: timed out)" in tpu_notes(node)


def test_a_refusing_server_is_a_warning_and_the_chips_stay(tmp_path: Path, refusing: str) -> None:
    node = node_with(tmp_path, refusing)
    assert len(node.devices) == 4
    assert "ConnectionRefusedError" in tpu_notes(node)


@pytest.mark.parametrize("opt_in", ["", "0", "no"])
def test_without_the_opt_in_nothing_is_asked(tmp_path: Path, answering: str, opt_in: str) -> None:
    node_with(tmp_path, answering, opt_in=opt_in)
    assert MetadataHandler.requests == []


def test_the_default_server_is_an_address_not_a_name() -> None:
    """No DNS lookup, which could itself hang past the budget."""
    host = metadata.DEFAULT_SERVER.split("/")[2]
    assert all(part.isdecimal() for part in host.split("."))
