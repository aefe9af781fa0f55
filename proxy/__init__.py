"""The recorder: mitmproxy's side of looptap.

Importing any of its modules first registers ``mitmproxy.addons`` with its ``__init__`` deferred to
the first of its own names read (:func:`~cassettes.lazy.init_on_first_use`). mitmproxy imports that
package for every addon module (``mitmproxy.master`` needs ``addons.termlog``), and its ``__init__``
imports all 31 default addons (flask and jinja2 for the onboarding app, passlib and ldap3 for proxy
auth, aioquic's QUIC parser …) where the recorder runs four: 420 of the 1,160 modules a ``looptap
run`` loaded. Every branch of a ``looptap why`` is such a run (docs/startup.md, docs/suite.md). A
stock mitmproxy tool loading the addon has imported the package already: nothing changes there;
neither where mitmproxy is not installed (the SDK side's environment).
"""

from __future__ import annotations

from ..cassettes.lazy import init_on_first_use

init_on_first_use("mitmproxy.addons")
