"""Instance facts from a cloud's metadata server: one bounded attempt, for users who opt in.

accelkit never touches the network by default; a family may offer its users an opt-in lookup
of what the machine's environment lacks (the TPU plugin's ``ACCELKIT_TPU_METADATA=1`` reads the
pod slice from GCE's server). The attempt is bounded as a whole, however many attributes are
asked, on one connection: a server that refuses, hangs or fails costs at most the budget and a
note, never detection itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from accelkit.diagnostics import note

__all__ = ["read_metadata"]

MAX_ANSWER_BYTES = 4096


def read_metadata(
    server: str,
    attributes: Mapping[str, str],
    headers: Mapping[str, str],
    budget: float = 1.0,
) -> dict[str, str]:
    """``{key: answer}`` for each ``{attribute: key}`` that ``server`` answers within ``budget``.

    ``server`` is the URL the attribute names are appended to; ``headers`` go with every
    request (GCE's ``Metadata-Flavor: Google``). A refusal, a timeout or an error ends the
    attempt with a warning, keeping what was answered before it; an attribute answered with
    another status than 200, or with nothing, is left out.
    """
    import http.client  # only for a family whose user opted in: it brings the email parser
    import socket
    import urllib.parse

    address = urllib.parse.urlsplit(server)
    deadline = time.monotonic() + budget
    answered: dict[str, str] = {}
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=budget)
    try:
        for attribute, key in attributes.items():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer within {budget:g} s")
            connection.timeout = remaining
            if connection.sock is not None:
                connection.sock.settimeout(remaining)
            path = address.path.rstrip("/") + "/" + attribute
            connection.request("GET", path, headers=dict(headers))
            response = connection.getresponse()
            body = response.read(MAX_ANSWER_BYTES).decode("utf-8", "replace").strip()
            if response.status == 200 and body:
                answered[key] = body
    except (OSError, http.client.HTTPException) as error:
        # Python 3.9's socket.timeout is its own class, named "timeout"; TimeoutError from 3.10
        kind = "TimeoutError" if isinstance(error, socket.timeout) else type(error).__name__
        reason = f"{kind}: {error}".rstrip(": ")
        note(f"metadata server {server} gave no answer ({reason})", "warning")
    finally:
        connection.close()
    return answered
