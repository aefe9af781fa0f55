"""The one recording pipeline (redact, delta-encode, parse, seal, append) and the redactor."""
