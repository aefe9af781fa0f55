"""What crossed the wire, uninterpreted: the raw exchange, Content-Encoding decoding, stream framing (SSE, NDJSON, JSON arrays, AWS event streams) and WebSocket sessions."""
