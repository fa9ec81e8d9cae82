"""The official Python `kubernetes` client's `portforward` against `podvisor serve`.

Usage: portforward.py KUBECONFIG POD HTTP_PORT ECHO_PORT CLOSED_PORT

One session forwards two ports (WebSocket `v4.channel.k8s.io`, a data and an error channel per
port): an HTTP GET on the first, an echo on the second (each read by its
length: as with the kubelet, a port's end shows only when the whole session ends). A second session on
a port nothing listens on reads the kubelet's words from the error channel. Prints one
`ok: ...` line per step.
"""

import sys

from kubernetes import client, config
from kubernetes.stream import portforward


def step(message):
    print(f"ok: {message}", flush=True)


def read_all(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def read_http(sock):
    """One HTTP/1.0 answer, by its Content-Length: a port's end is not seen before the
    session's (the v4 channel protocol has no per-channel close)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, body + read_exact(sock, length - len(body))


def main():
    kubeconfig, pod, http_port, echo_port, closed_port = sys.argv[1:6]
    http_port, echo_port, closed_port = int(http_port), int(echo_port), int(closed_port)
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()

    pf = portforward(
        core.connect_get_namespaced_pod_portforward,
        pod,
        "default",
        ports=f"{http_port},{echo_port}",
    )
    web = pf.socket(http_port)
    web.sendall(b"GET /blob HTTP/1.0\r\nHost: pf\r\n\r\n")
    head, body = read_http(web)
    assert head.startswith(b"HTTP/1.0 200"), head
    step(f"GET /blob: {len(body)} bytes")
    echo = pf.socket(echo_port)
    sent = bytes(range(256)) * 4096
    echo.sendall(sent)
    back = read_exact(echo, len(sent))
    assert back == sent, (len(back), len(sent))
    step(f"echo: {len(back)} bytes")
    assert pf.error(http_port) is None, pf.error(http_port)
    pf.close()

    pf = portforward(
        core.connect_get_namespaced_pod_portforward,
        pod,
        "default",
        ports=str(closed_port),
    )
    sock = pf.socket(closed_port)
    # The only port's connection failed: the session ends, so does the socket.
    read_all(sock)
    error = pf.error(closed_port)
    step(f"closed port: {error}")
    pf.close()


if __name__ == "__main__":
    main()
