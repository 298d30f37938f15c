"""Python's `websockets` (which negotiates permessage-deflate by default) against ark-ws with
compression on: an independent implementation of RFC 7692 on both sides.

Usage: python3 deflate_peer.py client ws://127.0.0.1:PORT/
           echoes through an ark-ws server: prints the extension the server answered, then
           "interop ok" once every message came back as sent.
       python3 deflate_peer.py server
           an echo server with websockets' default compression settings (12-bit windows
           both ways); prints "port N" and "answered <extensions>" for each connection, and
           exits after its first connection closes.
Exits 0 when every check passes; prints the failing check and exits 1 otherwise.
"""
import asyncio
import sys

import websockets


def messages():
    """What the client sends: short (below ark's threshold) and long, text and binary,
    compressible and not, and a fragmented text message."""
    text = "".join(f"message {i} of a compressible text; " for i in range(3000))
    noise = bytes((i * 7919 + (i >> 8) * 31) % 251 for i in range(70_000))
    return ["hi", "é" * 500, text, b"\x00\x01\xfe\xff", bytes(300_000), noise, ["frag", "men", "ted" * 200]]


async def client(url: str) -> None:
    async with websockets.connect(url, max_size=2**24) as ws:
        answered = ws.response.headers.get("Sec-WebSocket-Extensions")
        print(f"answered {answered}", flush=True)
        assert answered and answered.startswith("permessage-deflate"), "deflate negotiated"
        for message in messages():
            await ws.send(message)
            expected = "".join(message) if isinstance(message, list) else message
            assert await ws.recv() == expected, f"echo of a {len(expected)}-long message"
        await ws.close(code=1000, reason="python done")
    print("interop ok", flush=True)


async def server() -> None:
    done = asyncio.get_running_loop().create_future()

    async def echo(ws):
        print(f"answered {ws.response.headers.get('Sec-WebSocket-Extensions')}", flush=True)
        try:
            async for message in ws:
                await ws.send(message)
        finally:
            if not done.done():
                done.set_result(None)

    async with websockets.serve(echo, "127.0.0.1", 0, max_size=2**24) as running:
        port = running.sockets[0].getsockname()[1]
        print(f"port {port}", flush=True)
        await asyncio.wait_for(done, timeout=60)


if __name__ == "__main__":
    try:
        if sys.argv[1] == "client":
            asyncio.run(client(sys.argv[2]))
        else:
            asyncio.run(server())
    except Exception as error:  # noqa: BLE001 - the test prints whatever failed
        print(f"FAILED: {error!r}", flush=True)
        sys.exit(1)
