"""Amazon Bedrock Converse: ``/model/{modelId}/converse`` and ``/converse-stream``.

Not in WIRE.md; the shapes follow the recordings in the corpus (pydantic-ai ``test_bedrock``) and
the Bedrock Runtime API reference. ``/model/{id}/invoke*`` with Anthropic's Messages body belongs
to the Anthropic adapter; every other InvokeModel body is :class:`BedrockInvoke`'s
(:mod:`cassettes.providers.bedrock._invoke`); the stream reader is in
:mod:`cassettes.providers.bedrock._stream`.

Usage: Bedrock's ``inputTokens`` *excludes* cache reads and writes. Every cached recording in the
corpus has ``totalTokens == inputTokens + outputTokens + cacheReadInputTokens +
cacheWriteInputTokens`` (e.g. 433 + 16 + 2752 + 0 = 3201), so the adapter adds both cache counts
to reach the inclusive ``input_tokens`` of :mod:`cassettes.models`.

Streams are AWS event-stream frames; the event name is the ``:event-type`` header and the
payload carries no ``type``. A stream is complete when ``messageStop`` *and* the trailing
``metadata`` event (the only carrier of usage) were both seen.
"""

from ._agents import BedrockAgents
from ._converse import BedrockConverse
from ._invoke import BedrockInvoke
from ._stream import ConverseStream

__all__ = ["BedrockAgents", "BedrockConverse", "BedrockInvoke", "ConverseStream"]
