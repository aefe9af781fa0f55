"""What crossed the wire, uninterpreted: the raw exchange, Content-Encoding decoding and stream
framing (SSE, NDJSON, JSON arrays, AWS event streams)."""
