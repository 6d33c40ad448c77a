#!/usr/bin/env python3
"""Serves the recorded-format Hugging Face hub answers of tests/data/hub on
127.0.0.1, for `moechat --screenshot` without a route to the hub:

    python3 tools/hub_fixture_server.py 8765 &
    MOECHAT_HUB_URL=http://127.0.0.1:8765 QT_QPA_PLATFORM=offscreen \\
        build/app/moechat --data-dir DIR --screenshot docs/screenshots

GET /api/models answers the search; GET /api/models/<repo>/tree/main answers every
repository with the test repository's file list (its Q8_0 file given the size and
checksum of a real Qwen3-30B-A3B Q8_0 file's shape). Anything else: 404.
"""
import http.server
import pathlib
import sys

HUB = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "hub"
Q8_SIZE = "32483932160"
Q8_SHA = "9c2b6f4d1e8a7c3b5d0f2e4a6c8b1d3f5e7a9c0b2d4f6e8a1c3e5b7d9f0a2c4e"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/api/models":
            body = (HUB / "search-qwen3-moe.json").read_bytes()
        elif path.startswith("/api/models/") and path.endswith("/tree/main"):
            text = (HUB / "tree-moechat-test.json").read_text()
            body = text.replace("@SIZE@", Q8_SIZE).replace("@SHA256@", Q8_SHA).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
