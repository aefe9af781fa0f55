"use strict";
// Node's built-in fetch through HTTP(S)_PROXY on a Node that has no NODE_USE_ENV_PROXY (< 22.21,
// 23, < 24): loaded with NODE_OPTIONS=--require by `looptap run` and by the replay side
// (`looptap replay`'s export lines, the pytest plugin; cassettes/net/_node_proxy.py). Node's own
// undici Agent (the global dispatcher Node makes when its fetch loads) with a connect that
// tunnels through the proxy (CONNECT) for https, and plain http sent to the proxy in absolute
// form, as HTTP_PROXY asks.
(() => {
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major >= 24 || (major === 22 && minor >= 21)) return; // NODE_USE_ENV_PROXY does it
  const env = process.env;
  const given = env.HTTPS_PROXY || env.https_proxy || env.HTTP_PROXY || env.http_proxy;
  if (!given) return;
  const sym = Symbol.for("undici.globalDispatcher.1");
  void globalThis.Headers; // loads Node's undici, which makes its global Agent
  const made = globalThis[sym];
  if (!made || made.constructor.name !== "Agent") return; // another dispatcher: left alone
  const net = require("node:net"), tls = require("node:tls");
  const proxy = new URL(given);
  const proxyPort = Number(proxy.port) || 80;
  const skip = (env.NO_PROXY || env.no_proxy || "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
  const direct = (host, port) => {
    host = host.toLowerCase().replace(/^\[|\]$/g, "");
    if (host === proxy.hostname.replace(/^\[|\]$/g, "") && port === proxyPort) return true;
    return skip.some((entry) => {
      if (entry === "*") return true;
      const bare = entry.replace(/^[a-z]+:\/\//, "");
      // host, host:port, [v6]:port; a bare IPv6 address (two colons or more) has no port
      const m = (bare.match(/:/g) || []).length > 1 && !bare.startsWith("[") ? [bare, bare, undefined] : /^(.*?)(?::(\d+))?$/.exec(bare);
      const h = m[1].replace(/^\[|\]$/g, "").replace(/^\*?\./, "."), p = m[2] ? Number(m[2]) : null;
      if (p !== null && p !== port) return false;
      return host === h.replace(/^\./, "") || (h.startsWith(".") ? host.endsWith(h) : host.endsWith("." + h));
    });
  };
  const Agent = made.constructor;
  function connect(opts, callback) {
    let called = false;
    const done = (err, sock) => { if (!called) { called = true; callback(err, sock); } };
    const https = opts.protocol === "https:";
    const port = Number(opts.port) || (https ? 443 : 80);
    const secure = (sock) => {
      if (!https) return done(null, sock);
      const host = opts.hostname.replace(/^\[|\]$/g, ""); // the name the certificate must carry
      const t = tls.connect({ socket: sock, host, servername: opts.servername || (net.isIP(host) ? undefined : host), ALPNProtocols: ["http/1.1"] });
      t.once("secureConnect", () => done(null, t));
      t.once("error", done);
    };
    if (!https || direct(opts.hostname, port)) {  // http reaches here for the proxy itself, or left out
      const s = net.connect(port, opts.hostname.replace(/^\[|\]$/g, ""));
      s.once("connect", () => secure(s));
      s.once("error", done);
      return;
    }
    const s = net.connect(proxyPort, proxy.hostname.replace(/^\[|\]$/g, ""));
    s.once("error", done);
    s.once("connect", () => s.write(`CONNECT ${opts.hostname}:${port} HTTP/1.1\r\nHost: ${opts.hostname}:${port}\r\n\r\n`));
    let head = Buffer.alloc(0);
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) {
        if (head.length > 16384) { s.destroy(); done(new Error("the proxy's answer to CONNECT is too long")); }
        return;
      }
      s.removeListener("data", onData);
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString("latin1"));
      if (!status || status[1] !== "200") {
        s.destroy();
        return done(new Error(`the proxy answered CONNECT with ${status ? status[1] : "no status"}`));
      }
      if (head.length > end + 4) s.unshift(head.subarray(end + 4));
      secure(s);
    };
    s.on("data", onData);
  }
  class ThroughProxy extends Agent {
    dispatch(opts, handler) {
      const origin = new URL(opts.origin);
      const port = Number(origin.port) || 80;
      if (origin.protocol !== "http:" || direct(origin.hostname, port)) return super.dispatch(opts, handler);
      let headers = opts.headers;  // the Host header names the target, not the proxy
      if (Array.isArray(headers)) headers = [...headers, "host", origin.host];
      else headers = { ...(headers || {}), host: origin.host };
      return super.dispatch({ ...opts, origin: proxy.origin, path: origin.origin + opts.path, headers }, handler);
    }
  }
  globalThis[sym] = new ThroughProxy({ connect });
})();
