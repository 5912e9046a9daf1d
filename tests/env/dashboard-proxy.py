"""Forward HTTP proxy of the test environment: every request goes to the one Ray dashboard.

A KubeRay operator reaches a RayCluster's dashboard at
`http://<head-service>.<namespace>.svc.cluster.local:<port>`, a name nothing in the
environment's network namespace resolves. Its dashboard client is Go's `http.Client` with
the default transport, which honours `HTTP_PROXY`; the environment starts KubeRay with
`HTTP_PROXY` pointing here, and this proxy sends every request, whatever its host and port,
to the environment's single Ray head (the same rewrite the submitter runner applies to the
submitter's command). Requests to 127.0.0.1 / localhost (the API server) never reach a proxy:
Go's proxy selection exempts loopback addresses.

    python dashboard-proxy.py --listen 127.0.0.1:8266 --dashboard 127.0.0.1:8265

`GET /healthz` (origin form, i.e. asked of the proxy itself) answers `ok`.
"""

import argparse
import http.client
import http.server
import sys
import urllib.parse

# Hop-by-hop headers (RFC 9110 7.6.1) are the proxy's own, never forwarded.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


def handler(dashboard_host, dashboard_port):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            if self.path == "/healthz":
                self.reply(200, b"ok")
                return
            url = urllib.parse.urlsplit(self.path)
            target = (url.path or "/") + (f"?{url.query}" if url.query else "")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP
            }
            headers["Host"] = f"{dashboard_host}:{dashboard_port}"
            conn = http.client.HTTPConnection(dashboard_host, dashboard_port, timeout=60)
            try:
                conn.request(self.command, target, body, headers)
                resp = conn.getresponse()
                data = resp.read()
            except OSError as e:
                self.reply(502, f"dashboard {dashboard_host}:{dashboard_port}: {e}".encode())
                return
            finally:
                conn.close()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def reply(self, status, text):
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = forward

        def do_CONNECT(self):
            self.reply(405, b"CONNECT is not supported: the dashboard is plain HTTP")

        def log_message(self, format, *args):
            sys.stderr.write(f"{self.command} {self.path} -> {format % args}\n")

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:8266")
    parser.add_argument("--dashboard", default="127.0.0.1:8265")
    args = parser.parse_args()
    listen_host, listen_port = args.listen.rsplit(":", 1)
    dash_host, dash_port = args.dashboard.rsplit(":", 1)
    server = http.server.ThreadingHTTPServer(
        (listen_host, int(listen_port)), handler(dash_host, int(dash_port))
    )
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
