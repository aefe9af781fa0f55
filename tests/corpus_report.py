"""Walk the whole corpus through import and parsing; print counts per family and every problem.

    python tests/corpus_report.py

The same walk backs tests/cassettes/test_corpus.py.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).parent))

from real_corpus import corpus_exchanges, corpus_files, rel

from looptap.cassettes.parsing import parse_exchange


@dataclass
class CorpusReport:
    files: int = 0
    exchanges: int = 0
    by_family: Counter[str] = field(default_factory=Counter)
    by_family_stream: Counter[tuple[str, str, bool]] = field(default_factory=Counter)
    errors: list[tuple[str, int, str, list[str]]] = field(default_factory=list)
    truncated: list[tuple[str, int, str]] = field(default_factory=list)
    unknown: list[tuple[str, int, str]] = field(default_factory=list)
    in_stream_errors: list[tuple[str, int, str]] = field(default_factory=list)
    #: Hosts and URLs of the traffic labelled ``none`` (not an LLM call), to review that label.
    none_hosts: Counter[str] = field(default_factory=Counter)
    none_urls: list[str] = field(default_factory=list)
    #: Non-loop calls read for usage (embeddings): how many have usage.
    with_usage: Counter[str] = field(default_factory=Counter)


def walk() -> CorpusReport:
    rep = CorpusReport(files=len(corpus_files()))
    for path, i, ex in corpus_exchanges():
        rep.exchanges += 1
        rt = parse_exchange(ex)
        rep.by_family[rt.family] += 1
        rep.by_family_stream[(rt.family, rt.operation or "-", rt.stream)] += 1
        if rt.analysis_errors:
            rep.errors.append((rel(path), i, rt.family, rt.analysis_errors))
        if rt.family == "none":
            rep.none_hosts[urlsplit(ex.url).netloc] += 1
            rep.none_urls.append(f"{ex.method} {ex.url}")
        if rt.response is not None and rt.response.usage is not None:
            rep.with_usage[rt.family] += 1
        if rt.family == "unknown":
            rep.unknown.append((rel(path), i, ex.url))
        if rt.response is not None and rt.response.complete is False:
            rep.truncated.append((rel(path), i, rt.family))
        if (
            rt.response is not None
            and rt.response.error is not None
            and rt.response.error.in_stream
        ):
            rep.in_stream_errors.append((rel(path), i, rt.family))
    return rep


def main() -> None:
    rep = walk()
    print(f"{rep.files} cassette files, {rep.exchanges} HTTP interactions")
    print("\nby family:")
    for fam, n in rep.by_family.most_common():
        print(f"  {fam:18} {n:5}")
    print("\nby family / operation / streamed:")
    for (fam, op, stream), n in sorted(rep.by_family_stream.items()):
        print(f"  {fam:18} {op:18} {'stream' if stream else 'json':6} {n:5}")
    print(f"\nanalysis errors: {len(rep.errors)}")
    for f, i, fam, errs in rep.errors:
        print(f"  {f} #{i} [{fam}]: {'; '.join(errs)}")
    print(f"\nstreams without their terminal event (truncated): {len(rep.truncated)}")
    for f, i, fam in rep.truncated:
        print(f"  {f} #{i} [{fam}]")
    print(f"\nerrors inside 200 streams: {len(rep.in_stream_errors)}")
    for f, i, fam in rep.in_stream_errors:
        print(f"  {f} #{i} [{fam}]")
    print(
        f"\nLLM-looking traffic of no known family (kept raw, labelled unknown): {len(rep.unknown)}"
    )
    for f, i, url in rep.unknown:
        print(f"  {f} #{i} {url}")
    print(f"\nnot LLM calls (labelled none), by host: {sum(rep.none_hosts.values())}")
    for host, n in rep.none_hosts.most_common():
        print(f"  {host:40} {n:5}")


if __name__ == "__main__":
    main()
