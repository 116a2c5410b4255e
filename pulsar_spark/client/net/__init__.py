"""The client's network: sockets, TLS, the connection handshake, frame dispatch, lookup."""
