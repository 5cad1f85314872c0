#!/usr/bin/env python3
"""A registry that answers slowly on purpose: a reverse proxy in front of the real node's
plain-HTTP registry that holds every response back for a while before sending it.

    slow-registry.py LISTEN_ADDR UPSTREAM_ADDR DELAY_SECONDS

cold-pull.sh starts it and points real-0's containerd mirrors of registry.k8s.io and
docker.io at it, so that the first pull of an image takes a few seconds (one delay per
request: resolve, manifest, config, each layer), as a pull from a remote registry does on
upstream's kind cluster. Every method, path, query and header is passed on unchanged
(Host aside); bodies are streamed.
"""

import http.client
import shutil
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailers", "transfer-encoding", "upgrade", "host",
}


def handler(upstream: str, delay: float):
    class Slow(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            time.sleep(delay)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn = http.client.HTTPConnection(upstream, timeout=120)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = None
                if resp.getheader("Content-Length") is None and self.command != "HEAD":
                    data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                if data is not None:
                    self.send_header("Content-Length", str(len(data)))
                elif resp.getheader("Content-Length") is not None:
                    self.send_header("Content-Length", resp.getheader("Content-Length"))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if data is not None:
                    self.wfile.write(data)
                else:
                    shutil.copyfileobj(resp, self.wfile)
            finally:
                conn.close()

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = forward

        def log_message(self, fmt, *args):
            sys.stderr.write("slow-registry: %s %s\n" % (self.address_string(), fmt % args))

    return Slow


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: slow-registry.py LISTEN_ADDR UPSTREAM_ADDR DELAY_SECONDS")
    host, port = sys.argv[1].rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), handler(sys.argv[2], float(sys.argv[3])))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
