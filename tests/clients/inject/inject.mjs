// The JavaScript twin of mutate.py (read that first): loaded with `node --import` into every Node
// client of the matrix; with LOOPTAP_MATRIX_BUG set, the first qualifying LLM request of the process
// is mutated on its way out through fetch (openai-node, the Vercel AI SDK, LangChain.js, the OpenAI
// Agents SDK, Mastra and Gemini CLI all send with the global fetch) and marked with the header x-matrix-injected.
const KIND = process.env.LOOPTAP_MATRIX_BUG;
const MARK = "x-matrix-injected";

function familyOf(path) {
  if (path.endsWith("/chat/completions")) return "openai_chat";
  if (path.endsWith("/responses")) return "openai_responses";
  if (path.endsWith("/messages")) return "anthropic";
  if (path.endsWith(":generateContent") || path.endsWith(":streamGenerateContent")) return "gemini";
  return null;
}

function results(family, body) {
  const out = [];
  if (family === "openai_chat") (body.messages || []).forEach((m, i, a) => { if (m && m.role === "tool") out.push([a, i, m]); });
  if (family === "openai_responses" && Array.isArray(body.input))
    body.input.forEach((m, i, a) => { if (m && m.type === "function_call_output") out.push([a, i, m]); });
  if (family === "anthropic")
    for (const m of body.messages || []) if (Array.isArray(m && m.content))
      m.content.forEach((b, i, a) => { if (b && b.type === "tool_result") out.push([a, i, b]); });
  if (family === "gemini")
    for (const m of body.contents || []) if (Array.isArray(m && m.parts))
      m.parts.forEach((p, i, a) => { if (p && p.functionResponse) out.push([a, i, p]); });
  return out;
}

const state = { done: false, seen: 0, groups: 0 };

const TEXT_VARIANTS = ["mutate_history", "mutate_shorter", "mutate_equal"];
const GROUP_VARIANTS = ["mutate_reorder", "mutate_argument", "mutate_drop_middle"];
const SAME_LENGTH = { sunny: "foggy", rainy: "windy", cloudy: "stormy" };

function rewritten(text) {  // as mutate.py's _rewritten: longer, shorter or of equal length
  if (KIND === "mutate_history") return text.replaceAll("WEATHER:", "MUTATED: the client rewrote this after the fact;");
  let out = text;
  for (const [word, other] of Object.entries(SAME_LENGTH))
    if (out.includes(word)) out = out.replace(" " + word, KIND === "mutate_shorter" ? "" : " " + other);
  if (out === text) out = text.slice(0, -1) + (KIND === "mutate_shorter" ? "" : text.endsWith("?") ? "!" : "?");
  return out;
}

function rewrite(node) {  // every string carrying a tool's output, rewritten in place
  for (const [k, v] of Object.entries(node)) {
    if (typeof v === "string" && v.includes("WEATHER:")) node[k] = rewritten(v);
    else if (v && typeof v === "object") rewrite(v);
  }
}

function callsOf(family, item) {  // the dicts that hold an item's tool calls' arguments
  if (!item || typeof item !== "object") return [];
  if (family === "openai_chat") return (item.tool_calls || []).map((c) => c.function).filter(Boolean);
  if (family === "openai_responses") return item.type === "function_call" ? [item] : [];
  const blocks = family === "anthropic" ? item.content : item.parts;
  if (!Array.isArray(blocks)) return [];
  if (family === "anthropic") return blocks.filter((b) => b && b.type === "tool_use");
  return blocks.filter((p) => p && p.functionCall).map((p) => p.functionCall);
}

function groupEnd(family, items, i) {  // as mutate.py's _group_end
  if (!callsOf(family, items[i]).length) return i;
  let j = i + 1;
  if (family === "openai_responses") {
    while (j < items.length && items[j] && ["function_call", "function_call_output"].includes(items[j].type)
           && !(items[j].type === "function_call" && items[j - 1].type !== "function_call")) j++;
    return j;
  }
  if (family === "openai_chat") {
    while (j < items.length && items[j] && items[j].role === "tool") j++;
    return j > i + 1 ? j : i;
  }
  const next = items[i + 1];
  const answered = family === "anthropic"
    ? next && next.role === "user" && JSON.stringify(next.content || "").includes("tool_result")
    : next && JSON.stringify(next.parts || "").includes("functionResponse");
  return answered ? i + 2 : i;
}

function groups(family, items) {
  const out = [];
  for (let i = 0; i < items.length;) {
    const end = groupEnd(family, items, i);
    if (end > i) { out.push([i, end]); i = end; } else i++;
  }
  return out;
}

const upper = (v) => typeof v === "string" ? v.toUpperCase() : Array.isArray(v) ? v.map(upper)
  : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, upper(x)])) : v;

function regroup(family, items, gs) {  // as mutate.py's _regroup
  if (KIND === "mutate_argument") {
    if (!(state.groups && gs.length)) return false;
    const call = callsOf(family, items[gs[0][0]])[0];
    if (family === "openai_chat" || family === "openai_responses") call.arguments = JSON.stringify(upper(JSON.parse(call.arguments || "{}")));
    else if (family === "anthropic") call.input = upper(call.input || {});
    else call.args = upper(call.args || {});
    return true;
  }
  if (!(state.groups && gs.length >= 2) || gs[0][0] === 0) return false;
  const [[a, b], [c, d]] = gs;
  if (KIND === "mutate_reorder") items.splice(a, d - a, ...items.slice(c, d), ...items.slice(b, c), ...items.slice(a, b));
  else items.splice(a, b - a);
  return true;
}

function mutate(path, body) {
  const family = familyOf(path);
  if (state.done || !family || !body || typeof body !== "object") return false;
  const rs = results(family, body);
  let hit = false;
  if ((KIND === "drop_result" || KIND === "wrong_id") && rs.length) {
    const [box, i, item] = rs[rs.length - 1];
    if (KIND === "drop_result") box.splice(i, 1);
    else if (family === "gemini") item.functionResponse.name = "not_a_called_tool";  // Gemini pairs by name
    else item[{ openai_chat: "tool_call_id", openai_responses: "call_id", anthropic: "tool_use_id" }[family]] =
      family === "anthropic" ? "toolu_matrix_wrong_id_0001" : "call_matrix_wrong_id_0001";
    hit = true;
  }
  let seen = rs.length;
  const history = family === "openai_responses" ? (Array.isArray(body.input) ? body.input : [])
    : family === "gemini" ? body.contents || [] : body.messages || [];
  if (TEXT_VARIANTS.includes(KIND)) {
    const carriers = history.filter((m) => JSON.stringify(m).includes("WEATHER:"));
    if (state.seen && carriers.length > state.seen) {
      rewrite(carriers[0]);
      hit = true;
    }
    seen = carriers.length;
  } else if (GROUP_VARIANTS.includes(KIND)) {
    const gs = groups(family, history);
    hit = regroup(family, history, gs);
    state.groups = Math.max(state.groups, gs.length);
  }
  state.seen = Math.max(state.seen, seen);
  state.done = hit;
  return hit;
}

if (KIND) {
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init = {}) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
    let body = init.body;
    if (typeof body === "string" && (init.method || "GET").toUpperCase() === "POST") {
      let parsed;
      try { parsed = JSON.parse(body); } catch { parsed = undefined; }
      if (parsed !== undefined && mutate(url.pathname, parsed)) {
        const headers = new Headers(init.headers || {});
        headers.set(MARK, KIND);
        headers.delete("content-length");
        init = { ...init, headers, body: JSON.stringify(parsed) };
      }
    }
    return original(input, init);
  };
}
