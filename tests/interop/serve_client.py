"""A JSON client for `kareus serve` in the interop tests (imported by interop_cli_test.sh's Python)."""
import json
import urllib.error
import urllib.request


def call(port: int, path: str, body=None):
    """GET `path` (or POST `body` as JSON) on the server at 127.0.0.1:port; (status, parsed reply)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
