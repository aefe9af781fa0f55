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

const state = { done: false, seen: 0 };

function rewrite(node) {  // every string carrying a tool's output, rewritten in place
  for (const [k, v] of Object.entries(node)) {
    if (typeof v === "string") node[k] = v.replaceAll("WEATHER:", "MUTATED: the client rewrote this after the fact;");
    else if (v && typeof v === "object") rewrite(v);
  }
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
  if (KIND === "mutate_history") {
    const history = family === "openai_responses" ? (Array.isArray(body.input) ? body.input : [])
      : family === "gemini" ? body.contents || [] : body.messages || [];
    const carriers = history.filter((m) => JSON.stringify(m).includes("WEATHER:"));
    if (state.seen && carriers.length > state.seen) {
      rewrite(carriers[0]);
      hit = true;
    }
    seen = carriers.length;
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
