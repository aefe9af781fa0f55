"""What a request sent to a live upstream (past a fork's cursor, or new episodes being recorded)
is changed into. No re-exports; the modules: what-if edits (``edits``, made in a request by
``rewrite``), a request continuing an answer the live upstream never gave sent self-contained
(``chains``), an answer cut at the token cap continued (``continuation``), the model a request
asks for and the request with another (``model``), and where it goes: the recorder's listeners
(``upstreams``). The clients that send it are
:mod:`cassettes.net`'s.

Used by the replay server and by the fork's cursor alike; imports neither.
"""
