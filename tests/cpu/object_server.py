#!/usr/bin/env python3
"""A small HTTP server on 127.0.0.1 for the remote tier's HTTP and S3 tests (tests/cpu/http_servers.hpp).

--mode s3: an S3-compatible object store for the subset kiln speaks: GET, HEAD, PUT and DELETE of objects
by path (path-style: /<bucket>/<key>), kept in memory; every request's AWS SigV4 signature (header form)
verified against --access-key/--secret-key, and a PUT's x-amz-content-sha256 against its body; ETag,
Last-Modified and Date on every object answer; conditional writes as S3 has them since 2024 (PUT with
If-None-Match: * or If-Match: <etag>, DELETE with If-Match) answered 412 when they do not hold. Not
spoken: listing, multipart uploads, presigned URLs, chunked (streaming) signatures, versioning, ACLs.

The other modes are faults real servers do not make on demand: dribble (the headers, then one byte of
the body every 200 ms), truncated (a Content-Length of 1000, 10 bytes, then the connection closed),
huge (a 200 announcing 10^9 bytes, then bytes until the client hangs up), garbage (bytes that are not
HTTP), silent (accepts, reads, never answers).

Prints its port on the first line of stdout, then serves until killed. GET /__requests answers how many
requests came before it (itself not counted), so a test can tell that a client stopped asking.
"""
import argparse
import email.utils
import hashlib
import hmac
import http.server
import socket
import socketserver
import sys
import threading
import time
import urllib.parse

ARGS = None
OBJECTS = {}  # path -> (body, etag, last_modified seconds)
LOCK = threading.Lock()
REQUESTS = [0]


def sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def check_signature(handler, body):
    """None when the request's SigV4 signature verifies; else what is wrong."""
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no AWS4-HMAC-SHA256 Authorization header"
    fields = {}
    for part in auth[len("AWS4-HMAC-SHA256 "):].split(","):
        name, _, value = part.strip().partition("=")
        fields[name] = value
    try:
        access_key, date, region, service, terminal = fields["Credential"].split("/")
        signed_headers = fields["SignedHeaders"].split(";")
        signature = fields["Signature"]
    except (KeyError, ValueError):
        return "a malformed Authorization header"
    if access_key != ARGS.access_key:
        return "InvalidAccessKeyId"
    amz_date = handler.headers.get("x-amz-date", "")
    payload_hash = handler.headers.get("x-amz-content-sha256", "")
    if not payload_hash:
        return "no x-amz-content-sha256 header"
    if payload_hash != "UNSIGNED-PAYLOAD" and payload_hash != hashlib.sha256(body).hexdigest():
        return "XAmzContentSHA256Mismatch"
    for h in ("host", "x-amz-date", "x-amz-content-sha256"):
        if h not in signed_headers:
            return "the header %s is not signed" % h
    url = urllib.parse.urlsplit(handler.path)
    query = "&".join(sorted(q for q in url.query.split("&") if q))
    canonical_headers = "".join(
        "%s:%s\n" % (h, " ".join(handler.headers.get(h, "").split())) for h in signed_headers)
    canonical = "\n".join([handler.command, url.path, query, canonical_headers, ";".join(signed_headers), payload_hash])
    scope = "/".join([date, region, service, terminal])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = sign(sign(sign(sign(("AWS4" + ARGS.secret_key).encode(), date), region), service), terminal)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        return "SignatureDoesNotMatch"
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body are two writes: with Nagle's algorithm the second waits for the client's
    # delayed ACK (40 ms) on a kept connection.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_one(self):
        if self.path == "/__requests":
            return self.answer(200, str(REQUESTS[0]).encode())
        with LOCK:
            REQUESTS[0] += 1
        length = int(self.headers.get("Content-Length", "0") or "0")
        body = self.rfile.read(length) if length else b""
        if ARGS.mode == "dribble":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
            return
        if ARGS.mode == "truncated":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if ARGS.mode == "huge":
            self.send_response(200)
            self.send_header("Content-Length", str(10 ** 9))
            self.end_headers()
            piece = b"x" * 65536
            for _ in range(2048):  # at most 128 MiB
                self.wfile.write(piece)
            return
        problem = check_signature(self, body)
        if problem:
            return self.answer(403, ("<Error><Code>%s</Code></Error>" % problem).encode())
        path = urllib.parse.urlsplit(self.path).path
        with LOCK:
            held = OBJECTS.get(path)
            if_match = self.headers.get("If-Match")
            if self.command in ("GET", "HEAD"):
                if held is None:
                    return self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
                data, etag, modified = held
                return self.answer(200, data, [("ETag", etag), ("Last-Modified", email.utils.formatdate(modified, usegmt=True))])
            if self.command == "PUT":
                if self.headers.get("If-None-Match") == "*" and held is not None:
                    return self.answer(412, b"<Error><Code>PreconditionFailed</Code></Error>")
                if if_match is not None and (held is None or held[1] != if_match):
                    return self.answer(412, b"<Error><Code>PreconditionFailed</Code></Error>")
                etag = '"%s"' % hashlib.md5(body).hexdigest()
                OBJECTS[path] = (body, etag, time.time())
                return self.answer(200, b"", [("ETag", etag)])
            if self.command == "DELETE":
                if if_match is not None and (held is None or held[1] != if_match):
                    return self.answer(412, b"<Error><Code>PreconditionFailed</Code></Error>")
                OBJECTS.pop(path, None)
                return self.answer(204)
        return self.answer(405)

    do_GET = do_HEAD = do_PUT = do_DELETE = handle_one


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5: a fleet's processes connecting at once overflow it, and the
    # kernel then drops a connection's first packets and resends its SYN-ACK for up to ~30 s, so a client
    # sees no answer within its timeout. Real servers listen with hundreds (nginx: 511).
    request_queue_size = 512


def raw_server(reply):
    """Accepts on 127.0.0.1 and, per connection, reads a request and sends `reply` (or nothing)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", ARGS.port))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    held = []
    while True:
        conn, _ = listener.accept()
        held.append(conn)
        conn.recv(65536)
        if reply is not None:
            conn.sendall(reply)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="s3",
                        choices=["s3", "dribble", "truncated", "huge", "garbage", "silent"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--access-key", default="kilntestaccesskey")
    parser.add_argument("--secret-key", default="kiln-test-secret-key")
    ARGS = parser.parse_args()
    if ARGS.mode == "garbage":
        return raw_server(b"?this is not http\r\n\x01\x02\x03\r\n\r\n")
    if ARGS.mode == "silent":
        return raw_server(None)
    server = Server(("127.0.0.1", ARGS.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
