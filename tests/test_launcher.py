"""./release's client of the master's REST API (launcher/local.py), against a real HTTP server that
cuts its answers short, as the master's web server did once under a release's benchmark: `./release`
ended in a traceback (http.client.IncompleteRead) while the release went on."""

import http.server
import json
import threading

import pytest

from launcher import local

BODY = json.dumps({"builds": [{"buildid": 7}]}).encode()


class CutShort(http.server.BaseHTTPRequestHandler):
    """Answers with the whole body after `cut` answers that promise it and send part of it."""
    cut = 0
    served = 0

    def do_GET(self):
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        if type(self).served <= type(self).cut:
            self.wfile.write(BODY[:10])
            self.close_connection = True
        else:
            self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@pytest.fixture
def master(monkeypatch):
    monkeypatch.setattr(local, "READ_RETRY_SECONDS", 0)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CutShort)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def handler(master, cut):
    master.RequestHandlerClass = type("Cut", (CutShort,), {"cut": cut, "served": 0})
    return master.RequestHandlerClass


def test_a_read_cut_short_is_asked_again(master):
    served = handler(master, cut=local.READ_ATTEMPTS - 1)
    api = local.Api(f"http://127.0.0.1:{master.server_address[1]}")
    assert api.get("builds", order="-buildid", limit=1) == {"builds": [{"buildid": 7}]}
    assert served.served == local.READ_ATTEMPTS


def test_a_master_that_keeps_cutting_its_answers_short_is_one_error(master):
    served = handler(master, cut=local.READ_ATTEMPTS)
    api = local.Api(f"http://127.0.0.1:{master.server_address[1]}")
    with pytest.raises(local.ApiError) as failed:
        api.get("builds")
    assert failed.value.status is None
    assert str(failed.value).startswith(f"no whole answer from the master at {api.url}: IncompleteRead(")
    assert str(failed.value).endswith(f"(asked {local.READ_ATTEMPTS} times)")
    assert served.served == local.READ_ATTEMPTS


def test_waiting_for_the_worker_keeps_to_its_deadline(master, monkeypatch):
    """The wait polls once a second up to its limit; a read retried inside each poll would stretch
    the limit fivefold while the web server fails."""
    served = handler(master, cut=1000)
    monkeypatch.setattr(local, "WORKER_CONNECT_TIMEOUT", 0.5)
    api = local.Api(f"http://127.0.0.1:{master.server_address[1]}")
    with pytest.raises(local.LocalError, match="did not connect to the master within 0.5 s"):
        local.wait_for_worker(api, "release-local")
    assert served.served == 1
