"""The wire of looptap's loopback servers: an asyncio server on a thread of its own
(``background``), the HTTP/1.1 request reader (``http1``), every outgoing HTTP/1.1 message
(``outgoing``) and WebSocket framing (``wsframes``). Knows no cassette.
"""
