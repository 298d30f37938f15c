"""Drives an ark-ws echo server with Python's `websockets` library (an independent client).

Usage: python3 interop_client.py ws://127.0.0.1:PORT/ [wait-close]
       ARK_TEST_CA=ca.pem python3 interop_client.py wss://localhost:PORT/
For wss:// URLs the server is verified (chain and host name) against the CA in ARK_TEST_CA.
Exits 0 when every check passes; prints the failing check and exits 1 otherwise.
With `wait-close`, it only connects and waits for the server to close the connection, then
prints the close code it received.
"""
import asyncio
import os
import ssl
import sys

import websockets


def tls_context(url: str):
    """A verifying TLS context for wss:// URLs (None for ws://)."""
    if not url.startswith("wss://"):
        return None
    return ssl.create_default_context(cafile=os.environ["ARK_TEST_CA"])


async def main(url: str) -> None:
    async with websockets.connect(url, max_size=2**24, ssl=tls_context(url)) as ws:
        await ws.send("hello from python")
        assert await ws.recv() == "hello from python", "text echo"
        await ws.send(b"\x00\x01\xfe\xff")
        assert await ws.recv() == b"\x00\x01\xfe\xff", "binary echo"
        big = bytes(range(256)) * 4096  # 1 MiB
        await ws.send(big)
        assert await ws.recv() == big, "1 MiB binary echo"
        # A fragmented text message (websockets fragments an iterable of strings).
        await ws.send(["frag", "men", "ted"])
        assert await ws.recv() == "fragmented", "fragmented text reassembled"
        pong = await ws.ping(b"ping!")
        await asyncio.wait_for(pong, timeout=5)
        await ws.close(code=1000, reason="python done")
        assert ws.close_code == 1000, f"close code {ws.close_code}"


async def wait_close(url: str) -> None:
    async with websockets.connect(url, ssl=tls_context(url)) as ws:
        print("connected", flush=True)
        try:
            await ws.recv()
        except websockets.ConnectionClosed as closed:
            received = closed.rcvd.code if closed.rcvd else None
            print(f"closed {received} {closed.rcvd.reason if closed.rcvd else ''}", flush=True)
            return
    raise AssertionError("the server sent a message instead of closing")


if __name__ == "__main__":
    if sys.argv[2:] == ["wait-close"]:
        asyncio.run(asyncio.wait_for(wait_close(sys.argv[1]), timeout=30))
        sys.exit(0)
    try:
        asyncio.run(asyncio.wait_for(main(sys.argv[1]), timeout=30))
    except Exception as error:  # report any failure with its cause
        print(f"interop failure: {error!r}")
        sys.exit(1)
    print("interop ok")
