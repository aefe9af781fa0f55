/* looptap export --html: lays out the run data (cassettes/interop/report.py) as the inspector does.
 * Every recorded string is written with textContent: never innerHTML, never a URL or an attribute
 * built from recorded text. Turns are rendered a page at a time; a turn's messages and layers only
 * when it is selected. */
"use strict";
(function () {
  const PAGE = 200;           // turn rows per page
  const FOLD_AFTER = 20;      // messages shown before older ones fold
  const SHOW_AT_MOST = 500;   // most messages ever drawn for one turn (a request can hold 100,000)
  const FINDINGS_PAGE = 300;  // findings rows per page
  const SEV_MARK = { error: "✖", warning: "▲", info: "·" };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, ...kids) { for (const k of kids) if (k) parent.appendChild(k); return parent; }
  function num(v) { return v === null || v === undefined ? "-" : Number(v).toLocaleString("en-US"); }
  // "1 turn", "2 turns": a number and its noun, agreed (as cassettes/hints.py count writes them)
  function count(n, noun, plural) { return num(n) + " " + (n === 1 ? noun : plural || noun + "s"); }

  async function load() {
    const raw = document.getElementById("looptap-data").textContent;
    const wrapped = JSON.parse(raw);
    if (!wrapped.gzip) return wrapped;
    if (typeof DecompressionStream === "undefined") {
      throw new Error("the data is compressed and this browser cannot inflate it (DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 and later)");
    }
    // Compressed data: base64 of gzip, inflated by the browser's own DecompressionStream.
    const bin = atob(wrapped.gzip);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function badge(layer, b) {
    const sev = b[0];
    const s = el("span", "badge" + (sev ? " " + sev : ""), layer + (b[1] ? b[1] : ""));
    s.title = layer + ": " + (sev ? count(b[1], "finding") + ", worst " + sev : "nothing raised");
    return s;
  }

  function findingLine(f, withWhere) {
    const d = el("div", "finding " + f.severity + (f.caused_by ? " consequence" : ""));
    d.dataset.seq = f.seq === null ? "" : String(f.seq);
    add(d, el("span", "sev", (f.caused_by ? "↳ " : "") + SEV_MARK[f.severity] + " "), el("span", "code", f.layer + " " + f.code));
    if (withWhere) d.appendChild(el("span", "dim", "  #" + f.seq + " " + (f.conversation || "") + (f.turn !== null ? "/turn " + f.turn : "")));
    d.appendChild(el("span", null, "  " + f.message));
    if (f.caused_by) {
      d.appendChild(el("span", "dim", " (caused by " + f.caused_by + (f.caused_by_seq !== undefined ? " on #" + f.caused_by_seq : "") + ")"));
    }
    if (f.path) d.appendChild(el("span", "dim", "  at " + f.path));
    return d;
  }

  function kv(pairs) {
    const g = el("div", "kv");
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      add(g, el("span", "k", k), el("span", "v", v));
    }
    return g;
  }

  function start(data) {
    const byseq = new Map(data.turns.map((t) => [t.seq, t]));
    const histories = new Map();
    let convFilter = "";
    let rows = data.turns;
    let page = 0;
    let selected = null;

    // -- header --------------------------------------------------------------------------------
    const t = data.totals;
    document.getElementById("summary").textContent =
      count(data.round_trips, "round trip") + " · " + count(t.turns, "turn") + " · " + count(t.conversations, "conversation") + " · " +
      num(t.input) + " → " + num(t.output) + " tokens · cost " + t.cost_text + (t.cost_complete ? "" : " (partial)") +
      " · findings: " + count(t.findings.error, "error") + ", " + count(t.findings.warning, "warning") + ", " + num(t.findings.info) + " info";
    const probs = document.getElementById("problems");
    for (const p of data.problems.concat(data.analysis_errors)) probs.appendChild(el("li", null, p));

    // -- conversation switcher -----------------------------------------------------------------
    const sw = document.getElementById("conversation");
    const all = el("option", null, "all conversations (" + count(data.turns.length, "turn") + ")");
    all.value = "";
    sw.appendChild(all);
    for (const c of data.conversations) {
      // the title last: where the menu is narrower than the label, only the title is cut (…)
      const o = el("option", null, c.id + " · " + count(c.turns.length, "turn") + " · " + c.family + (c.kind_text ? " · " + c.kind_text : "") + (c.title ? " · “" + c.title + "”" : ""));
      o.value = c.id;
      sw.appendChild(o);
    }
    sw.addEventListener("change", () => {
      convFilter = sw.value;
      rows = convFilter ? data.turns.filter((r) => r.conv === convFilter) : data.turns;
      page = 0;
      renderList();
      if (rows.length) select(rows[0].seq);
      if (!document.getElementById("growth").classList.contains("hidden")) renderGrowth();
    });

    // -- tabs ----------------------------------------------------------------------------------
    const tabs = { turns: ["turnlist", "detail"], growth: ["growth"], findings: ["findings-list"] };
    function showTab(name) {
      for (const [k, ids] of Object.entries(tabs)) {
        document.getElementById("tab-" + k).setAttribute("aria-selected", String(k === name));
        for (const id of ids) document.getElementById(id).classList.toggle("hidden", k !== name);
      }
      if (name === "growth") renderGrowth();
      if (name === "findings") renderFindings();
    }
    for (const k of Object.keys(tabs)) document.getElementById("tab-" + k).addEventListener("click", () => showTab(k));

    // -- turn list, a page at a time -----------------------------------------------------------
    const list = document.getElementById("turnlist");
    // A turn's row: how it ended (an API error by its status, said once), its tokens when known.
    function rowFinish(r) {
      const http = r.status !== null && r.status !== undefined ? "HTTP " + r.status : "";
      const said = r.error ? (r.status >= 400 ? http : "error") : (r.finish || http);
      const tokens = r.in === null && r.out === null ? "" : " " + num(r.in) + "→" + num(r.out);
      return said + tokens + (r.calls ? " ⚙" + r.calls : "");
    }
    function renderList() {
      list.textContent = "";
      const pages = Math.max(1, Math.ceil(rows.length / PAGE));
      page = Math.min(page, pages - 1);
      const frag = document.createDocumentFragment();
      for (const r of rows.slice(page * PAGE, (page + 1) * PAGE)) {
        const d = el("div", "row");
        d.dataset.seq = String(r.seq);
        d.setAttribute("role", "option");
        d.setAttribute("aria-selected", String(r.seq === selected));
        const b = el("span");
        add(b, badge("E", r.badges.E), badge("A", r.badges.A), badge("C", r.badges.C));
        const fin = r.miss ? rowMiss(r.miss) : rowFinish(r);
        add(d, el("span", null, "#" + r.seq + " " + r.conv + "/" + r.turn), b, el("span", "fin", fin));
        d.addEventListener("click", () => select(r.seq));
        frag.appendChild(d);
      }
      list.appendChild(frag);
      if (pages > 1) {
        const p = el("div", "pager");
        const prev = el("button", null, "‹ previous");
        prev.disabled = page === 0;
        prev.addEventListener("click", () => { page--; renderList(); });
        const next = el("button", null, "next ›");
        next.disabled = page >= pages - 1;
        next.addEventListener("click", () => { page++; renderList(); });
        add(p, prev, el("span", "dim", "page " + (page + 1) + " of " + pages + " (" + count(rows.length, "turn") + ")"), next);
        list.appendChild(p);
      }
    }

    // A replay miss: looptap's replay answered (the API was not asked, no tokens), the client diverged.
    function rowMiss(m) { return "replay miss" + (m.path ? " at " + m.path : ": not in the recording"); }

    // -- the selected turn ---------------------------------------------------------------------
    function history(seq) {
      // A turn's message indices: its base turn's first `keep`, then its own (walked iteratively).
      if (histories.has(seq)) return histories.get(seq);
      const chain = [];
      let s = seq;
      while (s !== null && s !== undefined && !histories.has(s)) {
        const d = data.detail[String(s)];
        if (!d) break;
        chain.push(s);
        s = d.history[1] ? d.history[0] : null;
      }
      for (let i = chain.length - 1; i >= 0; i--) {
        const h = data.detail[String(chain[i])].history;
        const base = h[1] ? (histories.get(h[0]) || []).slice(0, h[1]) : [];
        histories.set(chain[i], base.concat(h[2]));
      }
      return histories.get(seq) || [];
    }

    function partNode(p) {
      if (p.call) return el("pre", null, "⚙ call " + p.call.name + "(" + (p.call.args || "") + ")  id=" + p.call.id);
      if (p.result) {
        return el("pre", null, "↩ result" + (p.result.name ? " for " + p.result.name : "") + " id=" + p.result.id +
          (p.result.error ? "  error" : "") + "\n" + (p.result.content || ""));
      }
      if (p.k === "media") return el("pre", "dim", "[" + (p.media || "media") + "]");
      if (p.k === "reasoning") return el("pre", "dim", p.t || "");
      if (p.k === "refusal") return el("pre", null, "refusal: " + (p.t || ""));
      if (p.k === "other") return el("pre", "dim", "[other: " + (p.t || "provider-specific block") + "]");
      return el("pre", null, p.t || "");
    }

    function messagesPane(d, seq) {
      const sec = el("section", "pane messages");
      const ids = history(seq);
      sec.appendChild(el("h3", null, "Messages the model saw (" + ids.length + ")"));
      if (!d.parsed) { sec.appendChild(el("p", "dim", "the request could not be parsed")); return sec; }
      const from = d.appended_from;
      const box = el("div");
      function draw(allOf) {
        box.textContent = "";
        let first = 0;
        const newStart = Math.min(from, ids.length);
        if (!allOf && ids.length > FOLD_AFTER) {
          first = Math.max(0, Math.min(newStart, ids.length - FOLD_AFTER));
        }
        if (ids.length - first > SHOW_AT_MOST) first = ids.length - SHOW_AT_MOST;
        if (first > 0) {
          if (allOf || ids.length - FOLD_AFTER <= 0) {
            box.appendChild(el("p", "dim", "… " + count(first, "earlier message") + " not drawn (at most the last " + SHOW_AT_MOST +
              " of a turn are; looptap show --json has them all)"));
          } else {
            const more = el("button", "more", "show the " + count(first, "older message"));
            more.addEventListener("click", () => draw(true));
            box.appendChild(more);
          }
        }
        for (let i = first; i < ids.length; i++) {
          const m = data.messages[ids[i]];
          const isNew = i >= from;
          const div = el("div", "msg" + (isNew ? " new" : ""));
          const role = el("div", "role", "[" + i + "] " + m.role);
          if (isNew) role.appendChild(el("span", "newmark", "▌ NEW"));
          div.appendChild(role);
          for (const p of m.parts) div.appendChild(partNode(p));
          box.appendChild(div);
        }
      }
      draw(false);
      sec.appendChild(box);
      return sec;
    }

    function layerFindings(sec, d, layer) {
      for (const f of d.findings) if (f.layer === layer) sec.appendChild(findingLine(f, false));
    }

    function ePane(d) {
      const e = d.layers.E;
      const sec = el("section", "pane layer-E");
      sec.appendChild(el("h3", null, "E — what the model emitted"));
      layerFindings(sec, d, "E");
      if (e.reasoning) add(sec, el("div", "dim", "reasoning"), el("pre", "dim", e.reasoning));
      if (e.text) add(sec, el("div", "dim", "text"), el("pre", null, e.text));
      if (e.refusal) add(sec, el("div", "dim", "refusal"), el("pre", null, e.refusal));
      for (const c of e.calls) {
        sec.appendChild(el("pre", null, "⚙ " + c.name + "(" + (c.args || "") + ")  id=" + c.id));
        if (c.parse_error) sec.appendChild(el("div", "finding error", "arguments are not JSON: " + c.parse_error));
        for (const s of c.schema_errors) sec.appendChild(el("div", "finding warning", "schema: " + s));
        if (c.offered === false) sec.appendChild(el("div", "finding warning", "this tool was not offered"));
        for (const h of c.http || []) {  // the tools' HTTP calls that served it (issue 84)
          const ms = typeof h.duration === "number" ? "  " + Math.round(h.duration * 1000) + " ms" : "";
          const status = h.status !== null ? String(h.status) : (h.transport_error ? "transport-error" : "-");
          sec.appendChild(el("div", null, "⇄ tool http #" + h.seq + " " + h.method + " " + h.host + h.path + " → " + status + ms));
          if (h.sent) sec.appendChild(el("pre", "dim", "sent: " + h.sent));
          if (h.transport_error) sec.appendChild(el("div", "finding warning", "transport error: " + h.transport_error));
          if (h.got) sec.appendChild(el("pre", "dim", "got: " + h.got));
        }
        if (c.shell) {  // the process looptap run's tracer linked to it (issue 93)
          sec.appendChild(el("pre", c.shell.exit || c.shell.signal ? "finding warning" : null, c.shell.line));
          if (c.shell.files_line) sec.appendChild(el("pre", "dim", c.shell.files_line));
        }
        sec.appendChild(el("div", "dim", c.answered_by !== null && c.answered_by !== undefined
          ? "its result was sent back in #" + c.answered_by : "no later turn sent its result back"));
      }
      if (e.empty) sec.appendChild(el("div", "dim", "the answer is empty"));
      return sec;
    }

    function aPane(d) {
      const a = d.layers.A;
      const k = a.tokens;
      const sec = el("section", "pane layer-A");
      sec.appendChild(el("h3", null, "A — what the API reported"));
      layerFindings(sec, d, "A");
      const secs = (v) => (v === null || v === undefined ? null : Number(v).toFixed(3) + " s");
      sec.appendChild(kv([
        ["request", d.method + " " + d.path + "  (" + d.family + ")"],
        ["read", d.read && d.read !== "complete" ? d.read + ": " + d.unread.join("; ") + " (no finding rests on it)" : d.read],
        ["status", a.status === null ? "no response" : String(a.status)],
        ["finish", (a.finish_raw || "-") + (a.finish ? " → " + a.finish : "")],
        ["model", (a.model_requested || "-") + (a.model_served && a.model_served !== a.model_requested ? " → served " + a.model_served : "")],
        ["tokens", num(k.input) + " in (" + num(k.cache_read) + " cached, " + num(k.cache_write) + " written) → " + num(k.output) + " out" +
          (k.reasoning ? " (" + num(k.reasoning) + " reasoning)" : "") + "  [" + k.source + "]"],
        ["split", k.split.unsplit ? null : "input " + num(k.split.input) + " = system " + num(k.split.system) + " · tools " + num(k.split.tools) +
          " · history " + num(k.split.history) + " · results " + num(k.split.tool_results) + " · new " + num(k.split.new) + "  (estimated)"],
        ["cost", k.cost_text + " · cumulative " + k.cumulative_cost_text + (k.price_estimated || k.cumulative_estimated ? "  (~: estimated)" : "")],
        ["timing", [secs(a.ttfb) && "headers " + secs(a.ttfb), secs(a.ttft) && "first token " + secs(a.ttft), secs(a.duration) && "done " + secs(a.duration)].filter(Boolean).join(" · ")],
        ["stream", a.stream ? (a.complete === false ? "yes, cut before its end" : "yes") : "no"],
        ["request id", a.request_id],
        ["answered by", d.miss ? "looptap's replay, not the API: no recorded round trip matches this request (the client's divergence: see C)" : null],
        ["error", a.error && !d.miss ? (a.error.in_stream ? "in stream: " : "HTTP " + a.error.status + ": ") + (a.error.type || "") + " " + (a.error.message || "") : null],
      ]));
      const rl = Object.entries(a.rate_limit || {});
      if (rl.length) sec.appendChild(kv(rl));
      return sec;
    }

    function cPane(d) {
      const c = d.layers.C;
      const sec = el("section", "pane layer-C");
      sec.appendChild(el("h3", null, "C — what the client dispatched"));
      layerFindings(sec, d, "C");
      if (d.miss) {
        sec.appendChild(kv([["closest recorded turn", d.miss.closest], ["why", d.miss.reason]]));
        if (d.miss.verdicts.length > 1) sec.appendChild(el("pre", null, d.miss.verdicts.slice(1).join("\n")));
        if (d.miss.changes.length) sec.appendChild(el("pre", null, "differences (recording → this request):\n  " + d.miss.changes.join("\n  ")));
      }
      sec.appendChild(kv([
        ["linked by", c.link_text],
        ["history", c.kept + " kept, " + c.rewritten + " rewritten, new from [" + c.appended_from + "]"],
        ["echo of the last answer", c.echoed_assistant === null ? null : c.echoed_assistant ? "yes" : "no"],
        ["tools offered", c.tools_offered.join(", ") || "none"],
        ["tool choice", c.tool_choice],
      ]));
      for (const p of c.pairings) {
        sec.appendChild(el("div", null, "↩ result for " + (p.name || "?") + " id=" + p.call_id +
          (p.call_turn !== null ? " (called in turn " + p.call_turn + ")" : " (no call found)") + (p.is_error ? " · error" : "")));
      }
      return sec;
    }

    const detail = document.getElementById("detail");
    function select(seq) {
      selected = seq;
      for (const r of list.querySelectorAll(".row")) r.setAttribute("aria-selected", String(r.dataset.seq === String(seq)));
      const r = byseq.get(seq);
      const d = data.detail[String(seq)];
      detail.textContent = "";
      if (!r || !d) return;
      detail.appendChild(el("h2", null, "#" + seq + " · " + r.conv + " turn " + r.turn + (r.model ? " · " + r.model : "")));
      add(detail, messagesPane(d, seq), ePane(d), aPane(d), cPane(d));
      detail.scrollTop = 0;
      const newMsg = detail.querySelector(".msg.new");
      if (newMsg && newMsg.scrollIntoView) newMsg.scrollIntoView({ block: "nearest" });
    }

    function move(step) {
      const i = rows.findIndex((r) => r.seq === selected);
      const j = Math.max(0, Math.min(rows.length - 1, (i < 0 ? 0 : i) + step));
      if (!rows.length) return;
      const want = Math.floor(j / PAGE);
      if (want !== page) { page = want; renderList(); }
      select(rows[j].seq);
      const row = list.querySelector('.row[aria-selected="true"]');
      if (row && row.scrollIntoView) row.scrollIntoView({ block: "nearest" });
    }
    document.addEventListener("keydown", (ev) => {
      if (ev.target && ev.target.tagName === "SELECT") return;
      if (ev.key === "j" || ev.key === "ArrowDown") { move(1); ev.preventDefault(); }
      else if (ev.key === "k" || ev.key === "ArrowUp") { move(-1); ev.preventDefault(); }
      else if (ev.key === "1") showTab("turns");
      else if (ev.key === "2") showTab("growth");
      else if (ev.key === "3") showTab("findings");
    });

    // -- findings, root cause first ------------------------------------------------------------
    const fl = document.getElementById("findings-list");
    let shownFindings = 0;
    function renderFindings() {
      if (shownFindings) return;
      fl.textContent = "";
      if (!data.findings.length) fl.appendChild(el("p", "dim", "no findings"));
      const more = el("button", "more");
      function next() {
        const frag = document.createDocumentFragment();
        for (const f of data.findings.slice(shownFindings, shownFindings + FINDINGS_PAGE)) {
          const line = findingLine(f, true);
          line.addEventListener("click", () => {
            if (f.seq === null || !byseq.has(f.seq)) return;
            if (convFilter && byseq.get(f.seq).conv !== convFilter) { sw.value = ""; sw.dispatchEvent(new Event("change")); }
            page = Math.floor(rows.findIndex((r) => r.seq === f.seq) / PAGE);
            showTab("turns");
            renderList();
            select(f.seq);
          });
          frag.appendChild(line);
        }
        shownFindings += FINDINGS_PAGE;
        fl.insertBefore(frag, more);
        more.textContent = "show more (" + Math.max(0, data.findings.length - shownFindings) + " left)";
        more.classList.toggle("hidden", shownFindings >= data.findings.length);
      }
      more.addEventListener("click", next);
      fl.appendChild(more);
      next();
    }

    // -- token-cost growth (uPlot) -------------------------------------------------------------
    const growthBox = document.getElementById("growth");
    function renderGrowth() {
      const conv = convFilter || (data.conversations.find((c) => c.turns.length) || {}).id;
      growthBox.textContent = "";
      const bars = data.growth[conv] || [];
      growthBox.appendChild(el("h2", null, "Token-cost growth · conversation " + (conv || "-") + " · " + count(bars.length, "turn") +
        (convFilter ? "" : " (choose another in the switcher)")));
      if (!bars.length) { growthBox.appendChild(el("p", "dim", "no turns")); return; }
      // Stacked bottom to top; each series holds its running total, drawn top first so the
      // lower parts paint over the higher ones.
      const parts = [["system prompt", 2, "#0072B2"], ["tool schemas", 3, "#56B4E9"], ["re-sent history", 4, "#009E73"],
        ["re-sent tool results", 5, "#F0E442"], ["new this turn", 6, "#E69F00"], ["output", 7, "#D55E00"]];
      const x = bars.map((b) => b[1]);
      const running = bars.map(() => 0);
      const stacks = parts.map(([, i]) => bars.map((b, j) => (running[j] += b[i])));
      const own = parts.map(([, i]) => bars.map((b) => b[i]));
      const cost = bars.map((b) => b[8]);
      const seriesData = [x];
      const series = [{ label: "turn" }];
      for (let s = parts.length - 1; s >= 0; s--) {
        seriesData.push(stacks[s]);
        const values = own[s];
        series.push({
          label: parts[s][0], stroke: parts[s][2], fill: parts[s][2], width: 0, scale: "tokens",
          paths: uPlot.paths.bars({ size: [0.8, 40] }), points: { show: false },
          value: (u, v, si, idx) => (idx === null || idx === undefined ? "" : num(values[idx])),
        });
      }
      seriesData.push(cost);
      series.push({ label: "cumulative cost", stroke: "#CC79A7", width: 2, scale: "usd",
        value: (u, v, si, idx) => (idx === null || idx === undefined ? "" : bars[idx][10]) });
      const ints = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7];
      new uPlot({
        width: Math.max(480, growthBox.clientWidth - 24), height: 420,
        // half a turn of room each side: the first and the last bar are drawn whole
        scales: { x: { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] }, tokens: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
        axes: [
          { label: "turn", incrs: ints, values: (u, vals) => vals.map((v) => String(Math.round(v))) },
          { scale: "tokens", label: "tokens", incrs: ints, size: 70, values: (u, vals) => vals.map((v) => num(Math.round(v))) },
          { scale: "usd", side: 1, label: "cumulative cost", size: 80, grid: { show: false },
            values: (u, vals) => {
              const step = vals.length > 1 ? Math.abs(vals[1] - vals[0]) : Math.abs(vals[0] || 1);
              const dp = Math.min(8, Math.max(2, 1 - Math.floor(Math.log10(step || 1))));
              return vals.map((v) => "$" + v.toFixed(dp));
            } },
        ],
        series,
      }, seriesData, growthBox);
      growthBox.appendChild(el("p", "dim", "Input split: system + tools + history + tool results + new = input, estimated from text size and scaled to the reported input (as looptap show prints it)."));
    }

    // Open at the turn that failed (data.open: a replay miss, else the first API error or error
    // finding), else at the first.
    const opening = rows.findIndex((r) => r.seq === data.open);
    page = Math.floor(Math.max(0, opening) / PAGE);
    renderList();
    if (rows.length) select(rows[Math.max(0, opening)].seq);
    const openRow = list.querySelector('.row[aria-selected="true"]');
    if (opening > 0 && openRow && openRow.scrollIntoView) openRow.scrollIntoView({ block: "nearest" });
    document.body.dataset.ready = "1";
    if (performance.mark) performance.mark("looptap-ready");  // bench/html_report.py reads it
  }

  document.body.dataset.ready = "reading";  // then "1", or "error": a test tells a page that never ran
  load().then(start, (err) => {
    document.getElementById("summary").textContent = "this report's data could not be read: " + err;
    document.body.dataset.ready = "error";
  });
})();
