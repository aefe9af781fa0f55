// The fork tests' weather agent on the Vercel AI SDK (tests/interop/traces/README.md, `ai-sdk*`):
// one tool loop per label, on OpenAI Chat (`openai.chat`, OPENAI_BASE_URL: `looptap run`'s) or
// Anthropic Messages (`anthropic-…` labels; the provider reads ANTHROPIC_BASE_URL itself),
// asking for the weather until the model stops calling the tool, traced by the SDK's own
// telemetry (`experimental_telemetry`) into an OTel JS tracer provider whose spans are written
// as one OTLP/JSON line to TRACE_FILE at the end. Prints `LABEL: final text` per label.
//
//   NPM_CLIENTS=PREFIX node traced_ai_sdk.js TRACE_FILE [LABEL ...]
//
// LABEL: generate (generateText), stream (streamText), anthropic-generate, anthropic-stream;
// TRACE_CONTENT=inputs-off / outputs-off
// sets recordInputs / recordOutputs false. PREFIX holds ai, @ai-sdk/openai, @ai-sdk/anthropic and the OTel JS SDK
// at the versions .ci/run's .npm-clients step pins.
const { createRequire } = require("node:module");
const { writeFileSync } = require("node:fs");
const need = createRequire(process.env.NPM_CLIENTS + "/package.json");
const { trace, context } = need("@opentelemetry/api");
const { AsyncLocalStorageContextManager } = need("@opentelemetry/context-async-hooks");
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = need("@opentelemetry/sdk-trace-base");
const { JsonTraceSerializer } = need("@opentelemetry/otlp-transformer");
const { resourceFromAttributes } = need("@opentelemetry/resources");

const [file, ...asked] = process.argv.slice(2);
const labels = asked.length ? asked : ["generate", "stream"];
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "ai-sdk-weather" }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);

const { generateText, streamText, tool, stepCountIs, jsonSchema } = need("ai");
const openai = need("@ai-sdk/openai").createOpenAI({ baseURL: process.env.OPENAI_BASE_URL });
const content = process.env.TRACE_CONTENT || "";
const telemetry = {
  isEnabled: true,
  recordInputs: content !== "inputs-off",
  recordOutputs: content !== "outputs-off",
};
const tools = {
  get_weather: tool({
    description: "The weather in a city.",
    inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
    execute: async ({ city }) => `sunny, 21 C in ${city}`,
  }),
};

async function loop(label) {
  const args = {
    model: label.startsWith("anthropic")
      ? need("@ai-sdk/anthropic").anthropic("claude-3-5-haiku-latest")
      : openai.chat("gpt-4o-mini"),
    system: "Use the weather tool.", tools, maxRetries: 0,
    prompt: `[${label}] Weather in three cities?`, stopWhen: stepCountIs(5),
    experimental_telemetry: { ...telemetry, functionId: label },
  };
  if (label.endsWith("stream")) {
    const r = streamText(args);
    for await (const _ of r.textStream) {}
    return await r.text;
  }
  return (await generateText(args)).text;
}

(async () => {
  const finals = await Promise.all(labels.map(loop));
  labels.forEach((label, i) => console.log(`${label}: ${finals[i]}`));
  await provider.forceFlush();
  if (file) writeFileSync(file, Buffer.from(JsonTraceSerializer.serializeRequest(exporter.getFinishedSpans())).toString() + "\n");
  await provider.shutdown();
})().catch((e) => { console.error(String(e)); process.exit(1); });
