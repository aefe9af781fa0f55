"""The one recording pipeline (redact, delta-encode, parse, derived view, seal, append) and the redactor."""
