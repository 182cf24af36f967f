"""A TCP proxy that cuts connections at random, between torture workers and a server.

Each chunk of bytes a client sends is, with probability ``cut_rate``, dropped and
the connection closed (*before*: the request never reaches the server, yet the
client sent it, so it cannot tell); each chunk the server sends back is, with the
same probability, passed on only in part before the connection is closed
(*mid-reply*: the request ran, its reply is lost). Both surface as
:class:`~memvault.errors.OutcomeUnknownError`. :meth:`CuttingProxy.outage` stops
listening for a while and cuts every open connection: connecting is then refused,
which surfaces as :class:`~memvault.errors.BackendUnavailableError`.

Threads, one pair per connection: it is meant for a handful of worker processes.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import Counter

_ACCEPT_POLL = 0.1


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class CuttingProxy:
    """Listen on a free local port and forward to ``target``, cutting at random.

    Attributes:
        port: where clients connect.
        request_cut_rate, reply_cut_rate: the chance of a cut per chunk each way (both
            ``cut_rate`` to begin with; a test sets them to cut one way at will).
        cuts: how many connections were cut, by kind (``before``, ``mid-reply``,
            ``outage``: open connections cut by an outage), and ``outages``.
    """

    def __init__(self, target: tuple[str, int], cut_rate: float, seed: int) -> None:
        self.target = target
        self.request_cut_rate = self.reply_cut_rate = cut_rate
        self.cuts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = False
        self._listener: socket.socket | None = self._listen(0)
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.create_server(("127.0.0.1", port), backlog=128)
        listener.settimeout(_ACCEPT_POLL)
        return listener

    def _cut(self, replies: bool) -> bool:
        rate = self.reply_cut_rate if replies else self.request_cut_rate
        with self._lock:
            return self._rng.random() < rate

    def _accept(self) -> None:
        while not self._closed:
            listener = self._listener
            if listener is None:
                time.sleep(_ACCEPT_POLL)
                continue
            try:
                client, _ = listener.accept()
            except OSError:  # a timeout, or the listener closed by an outage
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:  # the server is down: so is the connection
                _close(client)
                continue
            with self._lock:
                self._open.update((client, server))
            for source, sink, replies in ((client, server, False), (server, client, True)):
                threading.Thread(
                    target=self._pipe, args=(source, sink, replies), daemon=True
                ).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if self._cut(replies):
                    if replies:
                        sink.sendall(data[: len(data) // 2])
                    with self._lock:
                        self.cuts["mid-reply" if replies else "before"] += 1
                    break
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._open.difference_update((source, sink))
        _close(source)
        _close(sink)

    def _drop(self) -> int:
        """Stop listening and cut every open connection; returns how many."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            victims, self._open = list(self._open), set()
        for sock in victims:
            _close(sock)
        return len(victims) // 2

    def outage(self, seconds: float) -> None:
        """Refuse connections for ``seconds``, after cutting every open one."""
        cut = self._drop()
        with self._lock:
            self.cuts["outages"] += 1
            self.cuts["outage"] += cut
        time.sleep(seconds)
        self._listener = self._listen(self.port)

    def close(self) -> None:
        self._closed = True
        self._drop()
        self._thread.join()
